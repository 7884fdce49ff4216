//go:build !linux

package schedwait

import (
	"mmlab/experiment"
	"mmlab/experiment/schedwait"
	"mmlab/live"
)

// Run needs Linux: sched_setaffinity, clock_nanosleep and a tracefs
// instance.
var Run = live.UnsupportedRunner[*schedwait.Options, experiment.Env, schedwait.Result]("the live run pins threads and reads sched_switch from tracefs: needs Linux")
