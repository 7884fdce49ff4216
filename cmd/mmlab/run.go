package main

import (
	"context"
	"fmt"
	"os"
)

func init() {
	register(&command{
		name:    "run",
		summary: "run one experiment: mmlab run EXPERIMENT [--target model|live|both] ...",
		run:     runExperiment,
	})
}

// runExperiment is `mmlab run`: the named experiment's one path from flags
// to results (experiment.Experiment.Main).
func runExperiment(ctx context.Context, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintf(os.Stderr, "usage: mmlab run EXPERIMENT [FLAGS]\n\nexperiments, in seed order, then those of no seed:\n")
		for _, e := range boundExperiments {
			seed := "seed " + e.Seed()
			if e.Seed() == "" {
				seed = "no seed"
			}
			fmt.Fprintf(os.Stderr, "  %-10s %s: %s\n", e.Name(), seed, e.Summary())
		}
		fmt.Fprintf(os.Stderr, "\n'mmlab run EXPERIMENT --help' lists its flags.\n")
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if e := findExperiment(args[0]); e != nil {
		return e.Main(ctx, args[1:], os.Stdout, os.Stderr)
	}
	fmt.Fprintf(os.Stderr, "mmlab run: unknown experiment %q (mmlab run --help lists them)\n", args[0])
	return 2
}
