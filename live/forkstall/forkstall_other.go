//go:build !linux

package forkstall

import (
	"context"
	"errors"
)

// ChildMain does nothing off Linux.
func ChildMain() {}

// RunLive needs Linux.
func RunLive(ctx context.Context, o Options) (*Result, error) {
	return nil, errors.New("the live forkstall experiment needs Linux")
}
