//go:build !linux

package forkstall

import (
	"mmlab/experiment"
	"mmlab/experiment/forkstall"
	"mmlab/live"
)

// Run needs Linux.
var Run = live.UnsupportedRunner[*forkstall.Options, experiment.Env, forkstall.Result]("the live forkstall experiment needs Linux")
