//go:build !linux

package mapscan

import (
	"mmlab/experiment"
	"mmlab/experiment/mapscan"
	"mmlab/live"
)

// Run needs Linux processes and /proc: on other systems it says so.
var Run = live.UnsupportedRunner[*mapscan.Options, experiment.Env, mapscan.Result]("the live run reads /proc/PID/maps and pins helpers with sched_setaffinity: needs Linux")
