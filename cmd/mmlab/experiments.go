package main

import (
	"mmlab/experiment"
	"mmlab/experiment/forkstall"
	liveforkstall "mmlab/live/forkstall"
)

// boundExperiments pairs each experiment's definition (experiment/<name>)
// with its live runner (live/<name>), in seed order. It is the only place
// that imports both halves.
var boundExperiments = []experiment.Experiment{
	experiment.Bind(forkstall.Def, liveforkstall.Run),
}
