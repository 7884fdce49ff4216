package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"mmlab/experiment"
	"mmlab/experiment/seeds"
)

func init() {
	register(&command{
		name:    "report",
		summary: "rebuild the report from saved results; several hosts' results add a comparison: mmlab report DIR|FILE... [-o DIR]",
		run:     runReport,
	})
}

const reportUsage = `usage: mmlab report DIR|FILE... [-o DIR]

Rebuilds the HTML report (DIR/index.html) from saved results: directories
written by 'mmlab all' or 'mmlab run ... --out', or single JSON documents
(for example collected from a fleet with 'kubectl logs'). Documents are
grouped by the host that produced them (hostname and kernel); with more than
one host the report starts with a comparison, one row per host with each
seed's verdict and headline figure, and shows the seed sections of the first
host. -o defaults to the current directory.

`

func runReport(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	out := fs.String("o", ".", "directory to write index.html to")
	fs.Usage = func() { fmt.Fprint(fs.Output(), reportUsage); fs.PrintDefaults() }
	paths, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return experiment.ExitOK
		}
		return experiment.ExitUsage
	}
	if len(paths) == 0 {
		fmt.Fprintln(os.Stderr, "mmlab report: no results given (a directory or JSON file)")
		return experiment.ExitUsage
	}
	sets, err := seeds.Load(paths)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mmlab report: %v\n", err)
		return experiment.ExitFailed
	}
	page := seeds.Page(seeds.All(), sets)
	page.Generated = time.Now().Format(time.RFC3339)
	page.Command = "mmlab report " + strings.Join(args, " ")
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "mmlab report: -o %s: %v\n", *out, err)
		return experiment.ExitFailed
	}
	path := filepath.Join(*out, "index.html")
	if err := writeReport(path, page); err != nil {
		fmt.Fprintf(os.Stderr, "mmlab report: %v\n", err)
		return experiment.ExitFailed
	}
	fmt.Printf("report: %s (%d host(s))\n", path, len(sets))
	return experiment.ExitOK
}
