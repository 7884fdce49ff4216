package main

import (
	"mmlab/experiment"
	"mmlab/experiment/attach"
	"mmlab/experiment/forkstall"
	"mmlab/experiment/mapscan"
	"mmlab/experiment/mapslock"
	"mmlab/experiment/maptear"
	"mmlab/experiment/redzone"
	"mmlab/experiment/trigger"
	liveattach "mmlab/live/attach"
	liveforkstall "mmlab/live/forkstall"
	livemapscan "mmlab/live/mapscan"
	livemapslock "mmlab/live/mapslock"
	livemaptear "mmlab/live/maptear"
	liveredzone "mmlab/live/redzone"
	livetrigger "mmlab/live/trigger"
)

// boundExperiments pairs each experiment's definition (experiment/<name>)
// with its live runner (live/<name>), in seed order. It is the only place
// that imports both halves.
var boundExperiments = []experiment.Experiment{
	experiment.Bind(forkstall.Def, liveforkstall.Run),
	experiment.Bind(redzone.Def, liveredzone.Run),
	experiment.Bind(mapslock.Def, livemapslock.Run),
	experiment.Bind(mapscan.Def, livemapscan.Run),
	experiment.Bind(maptear.Def, livemaptear.Run),
	experiment.Bind(trigger.Def, livetrigger.Run),
	experiment.Bind(attach.Def, liveattach.Run),
}
