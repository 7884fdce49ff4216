package main

import (
	"mmlab/experiment"
	"mmlab/experiment/attach"
	"mmlab/experiment/trigger"
	liveattach "mmlab/live/attach"
	livetrigger "mmlab/live/trigger"
)

// boundExperiments pairs each experiment's definition (experiment/<name>)
// with its live runner (live/<name>), in seed order. It is the only place
// that imports both halves.
var boundExperiments = []experiment.Experiment{
	experiment.Bind(trigger.Def, livetrigger.Run),
	experiment.Bind(attach.Def, liveattach.Run),
}
