//go:build !linux

package mapscan

import (
	"context"

	"mmlab/experiment"
	"mmlab/experiment/mapscan"
	"mmlab/live"
)

// Run needs Linux processes and /proc: on other systems it says so.
func Run(ctx context.Context, o *mapscan.Options, env experiment.Env, emit func(mapscan.Result)) error {
	return live.Unsupported("the live run reads /proc/PID/maps and pins helpers with sched_setaffinity: needs Linux")
}
