//go:build !linux

package maptear

import (
	"mmlab/experiment"
	"mmlab/experiment/maptear"
	"mmlab/live"
)

// Run needs /proc/PID/maps: on other systems it says so.
var Run = live.UnsupportedRunner[*maptear.Options, experiment.Env, maptear.Result]("the live tearing check reads /proc/PID/maps: needs Linux")
