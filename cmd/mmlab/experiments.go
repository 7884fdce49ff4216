package main

import (
	"context"
	"io"

	"mmlab/experiment"
	"mmlab/experiment/attach"
	"mmlab/experiment/explorer"
	"mmlab/experiment/forkstall"
	"mmlab/experiment/mapscan"
	"mmlab/experiment/mapslock"
	"mmlab/experiment/maptear"
	"mmlab/experiment/redzone"
	"mmlab/experiment/refscale"
	"mmlab/experiment/schedwait"
	"mmlab/experiment/trigger"
	liveattach "mmlab/live/attach"
	liveforkstall "mmlab/live/forkstall"
	livemapscan "mmlab/live/mapscan"
	livemapslock "mmlab/live/mapslock"
	livemaptear "mmlab/live/maptear"
	liveredzone "mmlab/live/redzone"
	liverefscale "mmlab/live/refscale"
	livereplay "mmlab/live/replay"
	liveschedwait "mmlab/live/schedwait"
	livetrigger "mmlab/live/trigger"
	"mmlab/machine"
	"mmlab/replay"
	"mmlab/trace"
)

// boundExperiments pairs each experiment's definition (experiment/<name>)
// with its live runner (live/<name>), in seed order, then the checks of
// no seed. It is the only place that imports both halves.
var boundExperiments = []experiment.Experiment{
	experiment.Bind(forkstall.Def, liveforkstall.Run),
	experiment.Bind(redzone.Def, liveredzone.Run),
	experiment.Bind(explorer.Def, nil), // the model alone: interleavings
	experiment.Bind(mapslock.Def, livemapslock.Run),
	experiment.Bind(mapscan.Def, livemapscan.Run),
	experiment.Bind(maptear.Def, livemaptear.Run),
	experiment.Bind(trigger.Def, livetrigger.Run),
	experiment.Bind(attach.Def, liveattach.Run),
	experiment.Bind(schedwait.Def, liveschedwait.Run), // of no seed: the simulated scheduler against the kernel's
	experiment.Bind(refscale.Def, liverefscale.Run),   // of no seed: the model's read-side primitives, as kernel/rcu/refscale.c times them
}

// replayTargets are the two runners of `mmlab replay`: the model runs on
// the machine m, the live kernel on this host (m is machine.Host() there).
var replayTargets = map[string]func(ctx context.Context, m machine.Description, p *trace.Program, w io.Writer) error{
	"model": func(ctx context.Context, m machine.Description, p *trace.Program, w io.Writer) error {
		return replay.Run(ctx, m.Features, p, w)
	},
	"live": func(ctx context.Context, _ machine.Description, p *trace.Program, w io.Writer) error {
		return livereplay.Run(ctx, p, w)
	},
}
