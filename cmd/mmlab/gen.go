package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"mmlab/trace"
)

func init() {
	register(&command{
		name:    "gen",
		summary: "print a random trace for mmlab replay: mmlab gen [--seed N] [--ops N]",
		run:     runGen,
	})
}

func runGen(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	seed := fs.Int64("seed", 1, "seed of the generator (the same seed gives the same trace)")
	ops := fs.Int("ops", 40, "number of ops after the file declarations")
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: mmlab gen [--seed N] [--ops N]\n\nPrints a random, valid trace for 'mmlab replay' (see 'mmlab replay --help').\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 0 || *ops < 1 {
		fs.Usage()
		return 2
	}
	fmt.Print(trace.Generate(*seed, trace.GenOptions{Ops: *ops}))
	return 0
}
