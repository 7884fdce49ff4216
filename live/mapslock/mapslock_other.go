//go:build !linux

package mapslock

import (
	"runtime"

	"mmlab/experiment"
	"mmlab/experiment/mapslock"
	"mmlab/live"
)

// Run needs Linux.
var Run = live.UnsupportedRunner[*mapslock.Options, experiment.Env, mapslock.Result]("PROCMAP_QUERY needs Linux, not %s", runtime.GOOS)
