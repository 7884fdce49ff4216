//go:build !linux

package mapslock

import (
	"context"
	"runtime"

	"mmlab/experiment"
	"mmlab/experiment/mapslock"
	"mmlab/live"
)

// Run needs Linux.
func Run(ctx context.Context, o *mapslock.Options, env experiment.Env, emit func(mapslock.Result)) error {
	return live.Unsupported("PROCMAP_QUERY needs Linux, not %s", runtime.GOOS)
}
