package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"mmlab/live/maptear"
	modelmaptear "mmlab/procfs/maptear"
	"mmlab/report"
)

func init() {
	registerExperiment(&command{
		name:    "maptear",
		summary: "seed 003: can a /proc/PID/maps reader miss a VMA that changes under it?",
		run:     runMaptear,
		quick: func(ctx context.Context) int {
			return runMaptear(ctx, []string{"--reads", "2000", "--duration", "1s"})
		},
		order: 30,
	})
}

const maptearUsage = `usage: mmlab run maptear [--target model|live|both] [--variant before|after]
                        [--cases split,resize,remap] [--duration D] [--reads N]
                        [--file maps|smaps] [--pin] [--json]

The tearing check of the kernel's proc-maps-race.c. A process keeps changing
a VMA that straddles the boundary between two read() chunks of its
/proc/PID/maps text: split and merge (split), shrink and grow (resize), or a
page remapped into its middle (remap). A reader reads the two lines on either
side of the boundary and asks PROCMAP_QUERY for the VMA at the changing
address. A VMA may be reported twice (duplicates) or in its old or new form,
but a range mapped throughout must never be missing (gaps), the lines must be
the old or new form (unexpected), and the query must find the old or the new
VMA (query_gaps, query_wrong). All four must be 0; the exit status is 1 if
not. modified counts the reads that saw the change, showing that the race
ran. Each case runs for --duration or --reads reads, whichever ends first.
--file smaps reads /proc/PID/smaps instead (each VMA's line is followed by
its counters), the other variant of proc-maps-race.c; the query is the same.
--pin keeps the reader on CPU 0 and the modifier on CPU 1, so they overlap.
The live target needs Linux 6.11+ (PROCMAP_QUERY).

`

func runMaptear(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("maptear", flag.ContinueOnError)
	target := fs.String("target", "both", "model, live, or both")
	variant := fs.String("variant", "", "model walk: before or after (default: both)")
	cases := fs.String("cases", strings.Join(maptear.Cases, ","), "comma-separated cases")
	duration := fs.Duration("duration", 2*time.Second, "longest time per case")
	reads := fs.Int("reads", 0, "reads per case (0: as many as --duration allows)")
	asJSON := fs.Bool("json", false, "print one JSON document in the common schema instead of the table")
	pin := fs.Bool("pin", false, "live: run the reader on CPU 0 and the modifier on CPU 1")
	file := fs.String("file", "maps", "live: the file read, maps or smaps")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), maptearUsage)
		fs.PrintDefaults()
	}
	err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err == nil {
		err = checkTarget(*target, *variant, "before", "after")
	}
	opts := maptear.Options{Cases: strings.Split(*cases, ","), Duration: *duration, Reads: *reads, Pin: *pin, File: *file}
	if err == nil {
		err = opts.Prepare()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mmlab run maptear: %v\n", err)
		return 2
	}
	doc := report.New("maptear", map[string]any{"cases": opts.Cases, "duration_ms": duration.Milliseconds(), "reads": *reads, "pin": *pin, "file": *file})
	status := 0
	add := func(target, variant string, res []maptear.CaseResult) {
		for _, r := range res {
			doc.Add(target, variant, r.Fields())
			if r.Failed() {
				status = 1
			}
		}
	}
	if *target != "live" {
		variants := []string{"before", "after"}
		if *variant != "" {
			variants = []string{*variant}
		}
		for _, v := range variants {
			res, err := modelmaptear.Run(ctx, v, opts)
			add(report.TargetModel, v, res)
			if err != nil {
				fmt.Fprintf(os.Stderr, "mmlab run maptear: model %s: %v\n", v, err)
				status = 1
			}
		}
	}
	if *target != "model" {
		res, err := maptear.RunLive(ctx, opts)
		add(report.TargetLive, report.VariantKernel, res)
		if err != nil {
			fmt.Fprintf(os.Stderr, "mmlab run maptear: live: %v\n", err)
			status = 1
		}
	}
	if ctx.Err() != nil {
		status = 130
	}
	if *asJSON {
		if err := doc.WriteJSON(os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "mmlab run maptear: %v\n", err)
			return 1
		}
		return status
	}
	printMaptear(doc)
	return status
}

// printMaptear prints one row per target, variant and case.
func printMaptear(doc *report.MapDocument) {
	fmt.Printf("maptear: /proc/PID/maps tearing check (%s)\n", doc.Machine.Kernel)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	cols := []string{"reads", "modified", "duplicates", "gaps", "unexpected", "queries", "query_gaps", "query_wrong"}
	fmt.Fprintf(w, "target\tvariant\tfile\tcase\t%s\tverdict\t\n", strings.Join(cols, "\t"))
	for _, r := range doc.Results {
		fmt.Fprintf(w, "%s\t%s\t%v\t%s\t", r["target"], r["variant"], r["file"], r["case"])
		bad := 0
		for _, c := range cols {
			fmt.Fprintf(w, "%d\t", r[c])
			switch c {
			case "gaps", "unexpected", "query_gaps", "query_wrong":
				bad += r[c].(int)
			}
		}
		verdict := "ok"
		if bad > 0 {
			verdict = "TORN"
		}
		fmt.Fprintf(w, "%s\t\n", verdict)
	}
	w.Flush()
}
