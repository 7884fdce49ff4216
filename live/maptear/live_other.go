//go:build !linux

package maptear

import (
	"context"

	"mmlab/experiment"
	"mmlab/experiment/maptear"
	"mmlab/live"
)

// Run needs /proc/PID/maps: on other systems it says so.
func Run(ctx context.Context, o *maptear.Options, env experiment.Env, emit func(maptear.Result)) error {
	return live.Unsupported("the live tearing check reads /proc/PID/maps: needs Linux")
}
