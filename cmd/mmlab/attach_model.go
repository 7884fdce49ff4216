package main

import (
	"context"

	"mmlab/report"
	"mmlab/uprobes"
)

// The model side of `mmlab run attach`: package uprobes attaches and
// detaches N uprobes on a file that attachProcs model processes map,
// one running through the probed code; the flavours are measured in turn,
// run by run, each on its own model kernel on a model CPU (the host's other core stays free for the attaching task).

const attachProcs, attachCPUs = 4, 1

func runModelAttach(ctx context.Context, f attachFlags, doc *report.MapDocument) error {
	variants := []string{uprobes.SRCU, uprobes.TasksTrace}
	if f.variant != "" {
		variants = []string{f.variant}
	}
	doc.Params["model_procs"], doc.Params["model_cpus"] = attachProcs, attachCPUs
	runs, err := uprobes.AttachCost(ctx, uprobes.AttachConfig{Flavors: variants, Modes: f.modes, Ns: f.ns,
		Runs: f.runs, Procs: attachProcs, CPUs: attachCPUs})
	if err != nil {
		return err
	}
	for _, v := range variants {
		for _, n := range f.ns {
			for _, m := range f.modes {
				var at, de []float64
				for _, r := range runs {
					if r.Flavor == v && r.N == n && r.Mode == m {
						at, de = append(at, ms(r.Attach)), append(de, ms(r.Detach))
					}
				}
				doc.Add(report.TargetModel, v, map[string]any{
					"attach": m, "n": n,
					"attach_ms": report.Median(at), "attach_ms_runs": at,
					"detach_ms": report.Median(de), "detach_ms_runs": de,
				})
			}
		}
	}
	return nil
}
