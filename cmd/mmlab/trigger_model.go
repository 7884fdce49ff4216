package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"

	"mmlab/live/uprobe"
	"mmlab/report"
	"mmlab/uprobes"
)

// The model side of `mmlab run trigger`: package uprobes runs the kernel's
// trigger loop on model CPUs, one model kernel per protection flavour,
// sampled in turn so both see the same machine.

func runModelTrigger(ctx context.Context, f triggerFlags, doc *report.MapDocument) error {
	out := io.Writer(os.Stdout)
	if f.json {
		out = io.Discard
	}
	fmt.Fprintln(out, "model: the flavours alternate sample by sample; per CPU-second = hits per producer CPU-second x CPUs (what producers with a core each would do)")
	byFlavor := map[string][]map[string]any{}
	defer func() {
		for _, v := range f.variants {
			for _, fields := range byFlavor[v] {
				doc.Add(report.TargetModel, v, fields)
			}
		}
	}()
	for _, c := range f.cases {
		for _, n := range f.cpus {
			res, err := uprobes.Trigger(ctx, uprobes.TriggerConfig{Case: c, CPUs: n, Flavors: f.variants,
				Warmup: f.warmup, Duration: f.duration, Interval: f.interval})
			if err != nil {
				return fmt.Errorf("%s %d cpus: %w", c, n, err)
			}
			var srcu *uprobes.TriggerResult
			for i := range res {
				if res[i].Flavor == uprobes.SRCU {
					srcu = &res[i]
				}
			}
			for _, r := range res {
				mops, cpuMops := scale(r.Samples, 1e-6), scale(r.CPUSamples, 1e-6)
				mean, sd := report.MeanStddev(mops)
				fields := map[string]any{
					"attach": "model", "case": c, "cpus": n,
					"mops": mean, "mops_stddev": sd, "mops_runs": mops,
					"calls": r.Calls, "hits": r.Hits,
				}
				if len(cpuMops) > 0 {
					cm, csd := report.MeanStddev(cpuMops)
					fields["mops_cpu"], fields["mops_cpu_stddev"], fields["mops_cpu_runs"] = cm, csd, cpuMops
					fmt.Fprintf(out, "  %-11s per CPU-second: %s\n", r.Flavor, uprobeFormat(c, n, cm, csd))
				}
				if srcu != nil && r.Flavor != uprobes.SRCU {
					// Paired samples (taken in turn): the ratio of each pair.
					rm, rsd := report.MeanStddev(ratios(r.Samples, srcu.Samples))
					fields["ratio_vs_srcu"], fields["ratio_vs_srcu_stddev"] = rm, rsd
					line := fmt.Sprintf("  %s/srcu ratio: wall %.3f ± %.3f", r.Flavor, rm, rsd)
					if len(r.CPUSamples) > 0 && len(srcu.CPUSamples) > 0 {
						cm, csd := report.MeanStddev(ratios(r.CPUSamples, srcu.CPUSamples))
						fields["ratio_cpu_vs_srcu"], fields["ratio_cpu_vs_srcu_stddev"] = cm, csd
						line += fmt.Sprintf(", per CPU-second %.3f ± %.3f", cm, csd)
					}
					fmt.Fprintln(out, line)
				}
				byFlavor[r.Flavor] = append(byFlavor[r.Flavor], fields)
			}
		}
	}
	return nil
}

// uprobeFormat is the seed's line for a rate in M/s.
func uprobeFormat(c string, cpus int, mops, sd float64) string {
	return uprobe.FormatTrigger(c, cpus, mops*1e6, sd*1e6)
}

func scale(xs []float64, k float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x * k
	}
	return out
}

// ratios returns a[i]/b[i] for the pairs both have (b[i] > 0).
func ratios(a, b []float64) []float64 {
	var out []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 && !math.IsNaN(a[i]) {
			out = append(out, a[i]/b[i])
		}
	}
	return out
}
