//go:build !linux

package maptear

import (
	"context"
	"errors"
)

// RunLive needs /proc/PID/maps: on other systems it says so.
func RunLive(ctx context.Context, opts Options) ([]CaseResult, error) {
	return nil, errors.New("maptear: the live tearing check reads /proc/PID/maps: not supported on this system (Linux only)")
}
