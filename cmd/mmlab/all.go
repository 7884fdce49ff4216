package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"mmlab/experiment"
	"mmlab/experiment/seeds"
	"mmlab/report"
)

func init() {
	register(&command{
		name:    "all",
		summary: "the main job: every seed's experiments, model and live, with a verdict per seed and a report",
		run:     runAll,
	})
	register(&command{
		name:    "report",
		summary: "rebuild the report from saved results; several hosts' results add a comparison: mmlab report DIR|FILE... [-o DIR] [--skip-bad]",
		run:     runReport,
	})
}

const allUsage = `usage: mmlab all [--quick|--full] [--target model|live|both] [--machine NAME] [--out DIR] [--quiet]

Runs, seed by seed, the experiments that reproduce each patch series on the
model (before and after the change) and on this machine's kernel, prints
each seed's table (published figures, model, live) and a verdict, and saves
one JSON document per experiment and the report (index.html) under DIR.
--quick (the default) finishes in a few minutes on a 2-CPU machine; --full
uses the seeds' own settings and says how long it will take first.
--machine runs the model on a named description instead of this host's
features ('mmlab machines' lists them); the live kernel is this host, so a
named machine needs --target model.

`

func runAll(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("all", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	full := fs.Bool("full", false, "the seeds' own settings (long)")
	fs.Bool("quick", true, "the quick setting (the default)")
	smoke := fs.Bool("smoke", false, "the smallest setting that runs every part, in seconds (for tests: its figures say little)")
	target := fs.String("target", "both", "model, live or both")
	out := fs.String("out", "", "results directory (default mmlab-results-TIME in the current directory)")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	machineName := fs.String("machine", "host", experiment.MachineUsage)
	fs.Usage = func() { fmt.Fprint(fs.Output(), allUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return flagsFailed(err, nil, nil)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "mmlab all: unexpected argument %q\n", fs.Arg(0))
		return experiment.ExitUsage
	}
	if err := experiment.OneOf("target", *target, "model", "live", "both"); err != nil {
		fmt.Fprintf(os.Stderr, "mmlab all: %v\n", err)
		return experiment.ExitUsage
	}
	mach, err := experiment.ParseMachine(*machineName)
	if err == nil && *target != "model" {
		err = experiment.HostOnly(mach)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mmlab all: %v\n", err)
		return experiment.ExitUsage
	}
	all := seeds.All()
	setting := seeds.Quick
	switch {
	case *full && *smoke:
		fmt.Fprintln(os.Stderr, "mmlab all: --full and --smoke: choose one setting")
		return experiment.ExitUsage
	case *full:
		setting = seeds.Full
	case *smoke:
		setting = seeds.Smoke
	}
	dir := *out
	if dir == "" {
		dir = "mmlab-results-" + time.Now().Format("20060102-150405")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "mmlab all: --out %s: %v\n", dir, err)
		return experiment.ExitFailed
	}
	plan := seeds.Plan(all, setting)
	var total time.Duration
	for _, st := range plan {
		total += st.Est
	}
	if *full {
		fmt.Printf("mmlab all --full: %d experiments, about %s\n", len(plan), total.Round(time.Minute))
	}
	prog := seeds.NewProgress(os.Stderr, *quiet, total)
	status := experiment.ExitOK
	interrupted := false
	var page report.Page
	for _, s := range all {
		for _, st := range plan {
			if st.Seed != s || interrupted {
				continue
			}
			e := findExperiment(st.Experiment)
			if e == nil {
				fmt.Fprintf(os.Stderr, "mmlab all: seed %s names an unknown experiment %q\n", s.ID, st.Experiment)
				status = experiment.ExitFailed
				continue
			}
			log, err := os.Create(filepath.Join(dir, st.Experiment+".txt"))
			if err != nil {
				fmt.Fprintf(os.Stderr, "mmlab all: %v\n", err)
				return experiment.ExitFailed
			}
			prog.Begin(s.ID, st)
			args := append(append([]string{}, st.Args...), "--target", *target, "--machine", mach.Name, "--out", dir)
			fmt.Fprintf(log, "$ mmlab run %s %s\n", st.Experiment, strings.Join(args, " "))
			code := e.Main(ctx, args, log, prog)
			log.Close()
			prog.End()
			switch {
			case code == experiment.ExitInterrupted || ctx.Err() != nil:
				interrupted = true
			case code != experiment.ExitOK:
				fmt.Fprintf(os.Stderr, "mmlab all: %s exited %d (its output: %s)\n", st.Experiment, code, filepath.Join(dir, st.Experiment+".txt"))
				status = experiment.ExitFailed
			}
		}
		docs, err := seeds.ReadDocs(dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "mmlab all: %v\n", err)
			return experiment.ExitFailed
		}
		sec := s.Section(docs)
		seeds.WriteText(os.Stdout, s, sec)
		page.Seeds = append(page.Seeds, sec)
	}
	page.Title = "mmlab: the three seeds on " + report.ThisMachine().Kernel
	page.Generated = time.Now().Format(time.RFC3339)
	page.Command = "mmlab " + strings.Join(append([]string{"all"}, args...), " ")
	page.Hosts = []report.Host{{Name: dir, Machine: report.ThisMachine(), Model: report.ModelLabel(&report.ModelMachine{Name: mach.Name, Features: mach.Features})}}
	page.Interrupted = interrupted
	if err := writeFile(filepath.Join(dir, "index.html"), func(f *os.File) error { return report.WriteHTML(f, &page) }); err != nil {
		fmt.Fprintf(os.Stderr, "mmlab all: %v\n", err)
		return experiment.ExitFailed
	}
	fmt.Printf("\nresults: %s (one JSON document per experiment, their tables as .txt, the report index.html)\n", dir)
	if interrupted {
		fmt.Fprintln(os.Stderr, "mmlab all: interrupted; the results and the report hold what finished")
		return experiment.ExitInterrupted
	}
	return status
}

func findExperiment(name string) experiment.Experiment {
	for _, e := range boundExperiments {
		if e.Name() == name {
			return e
		}
	}
	return nil
}

const reportUsage = `usage: mmlab report DIR|FILE... [-o DIR] [--skip-bad]

Rebuilds the HTML report (DIR/index.html) from saved results: directories
written by 'mmlab all' or 'mmlab run ... --out', or single JSON documents
(for example collected from a fleet with 'kubectl logs'). Documents are
grouped by the host that produced them (hostname and kernel); with more than
one host the report starts with a comparison, one row per host with each
seed's verdict and headline figure, and shows the seed sections of the first
host. -o defaults to the current directory.

Each document is checked against its experiment's types first: one of a
newer schema_version, of an experiment this mmlab does not know, or with a
field of the wrong type, missing or out of its domain (a negative time, a
count that is not a whole number) is refused with its file, the field and
what was expected, and no report is written (exit 1); with --skip-bad the
report is built from the rest. Older schema versions are read.

`

func runReport(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	out := fs.String("o", ".", "directory to write index.html to")
	skipBad := fs.Bool("skip-bad", false, "build the report from the documents read, leaving out those refused (each is still named)")
	fs.Usage = func() { fmt.Fprint(fs.Output(), reportUsage); fs.PrintDefaults() }
	paths, err := parseInterleaved(fs, args)
	if err != nil {
		return flagsFailed(err, nil, nil)
	}
	if len(paths) == 0 {
		fmt.Fprintln(os.Stderr, "mmlab report: no results given (a directory or JSON file)")
		return experiment.ExitUsage
	}
	all := seeds.All()
	sets, bad, err := seeds.Load(all, paths)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mmlab report: %v\n", err)
		return experiment.ExitFailed
	}
	for _, err := range bad {
		fmt.Fprintf(os.Stderr, "mmlab report: %v\n", err)
	}
	switch {
	case len(bad) > 0 && !*skipBad:
		fmt.Fprintf(os.Stderr, "mmlab report: %d document(s) refused, no report written (--skip-bad builds it from the rest)\n", len(bad))
		return experiment.ExitFailed
	case len(sets) == 0:
		fmt.Fprintln(os.Stderr, "mmlab report: every document was refused, no report written")
		return experiment.ExitFailed
	}
	page := seeds.Page(all, sets)
	page.Generated = time.Now().Format(time.RFC3339)
	page.Command = "mmlab report " + strings.Join(args, " ")
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "mmlab report: -o %s: %v\n", *out, err)
		return experiment.ExitFailed
	}
	path := filepath.Join(*out, "index.html")
	if err := writeFile(path, func(f *os.File) error { return report.WriteHTML(f, page) }); err != nil {
		fmt.Fprintf(os.Stderr, "mmlab report: %v\n", err)
		return experiment.ExitFailed
	}
	skipped := ""
	if len(bad) > 0 {
		skipped = fmt.Sprintf(", %d refused document(s) left out", len(bad))
	}
	fmt.Printf("report: %s (%d host(s)%s)\n", path, len(sets), skipped)
	return experiment.ExitOK
}
