package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"mmlab/trace"
)

func init() {
	register(&command{
		name:    "gen",
		summary: "print a random trace for mmlab replay: mmlab gen [--family F] [--seed N] [--ops N]",
		run:     runGen,
	})
}

func runGen(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	family := fs.String("family", "basic", "the kind of trace (see the list above)")
	seed := fs.Int64("seed", 1, "seed of the generator (the same family and seed give the same trace)")
	ops := fs.Int("ops", 0, "number of ops after the file declarations (0: the family's)")
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: mmlab gen [--family F] [--seed N] [--ops N]\n\nPrints a random, valid trace for 'mmlab replay' (see 'mmlab replay --help').\n\nfamilies:\n")
		for _, f := range trace.Families {
			fmt.Fprintf(os.Stderr, "  %-9s %s\n", f.Name, f.Doc)
		}
		fmt.Fprintf(os.Stderr, "\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagsFailed(err, nil, nil)
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "mmlab gen: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if _, ok := trace.FamilyNamed(*family); !ok {
		var names []string
		for _, f := range trace.Families {
			names = append(names, f.Name)
		}
		fmt.Fprintf(os.Stderr, "mmlab gen: --family %q: want one of %s\n", *family, strings.Join(names, ", "))
		return 2
	}
	if *ops < 0 {
		fmt.Fprintf(os.Stderr, "mmlab gen: --ops %d: want 0 (the family's count) or more\n", *ops)
		return 2
	}
	fmt.Print(trace.Generate(*seed, trace.GenOptions{Family: *family, Ops: *ops}))
	return 0
}
