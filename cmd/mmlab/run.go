package main

import (
	"context"
	"fmt"
	"os"
	"slices"
)

// experiments are the subcommands of `mmlab run`. Each lives in its own file
// and adds itself with registerExperiment from an init function; its quick
// step, if any, is part of `mmlab all`.
var experiments = map[string]*command{}

func registerExperiment(c *command) { experiments[c.name] = c }

func init() {
	register(&command{
		name:    "run",
		summary: "run one experiment: mmlab run EXPERIMENT [--target model|live] ...",
		run:     runExperiment,
	})
}

func runExperiment(ctx context.Context, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintf(os.Stderr, "usage: mmlab run EXPERIMENT [FLAGS]\n\nexperiments:\n")
		names := make([]string, 0, len(experiments))
		for n := range experiments {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, e := range boundExperiments {
			fmt.Fprintf(os.Stderr, "  %-10s seed %s: %s\n", e.Name(), e.Seed(), e.Summary())
		}
		for _, n := range names {
			fmt.Fprintf(os.Stderr, "  %-10s %s\n", n, experiments[n].summary)
		}
		fmt.Fprintf(os.Stderr, "\n'mmlab run EXPERIMENT --help' lists its flags.\n")
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, e := range boundExperiments {
		if e.Name() == args[0] {
			return e.Main(ctx, args[1:], os.Stdout, os.Stderr)
		}
	}
	e, ok := experiments[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "mmlab run: unknown experiment %q (mmlab run --help lists them)\n", args[0])
		return 2
	}
	return e.run(ctx, args[1:])
}
