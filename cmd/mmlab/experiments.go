package main

import (
	"mmlab/experiment"
	"mmlab/experiment/mapslock"
	livemapslock "mmlab/live/mapslock"
)

// boundExperiments pairs each experiment's definition (experiment/<name>)
// with its live runner (live/<name>), in seed order. It is the only place
// that imports both halves.
var boundExperiments = []experiment.Experiment{
	experiment.Bind(mapslock.Def, livemapslock.Run),
}
