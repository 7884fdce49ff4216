package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
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

const allUsage = `usage: mmlab all [--quick|--full|--smoke] [--target model|live|both|sim] [--no-sim]
                 [--machine NAME] [--out DIR] [--quiet]
       mmlab all --full --points
       mmlab all --full --point I [--out DIR] [--quiet]

Runs, seed by seed, the experiments that reproduce each patch series on the
model (before and after the change) and on this machine's kernel, prints
each seed's table (published figures, model, live) and a verdict, and saves
one JSON document per experiment and the report (index.html) under DIR.
--quick (the default) finishes in a few minutes on a 2-CPU machine; --full
uses the seeds' own settings and says how long it will take first.
--machine runs the model on a named description instead of this host's
features ('mmlab machines' lists them); the live kernel is this host, so a
named machine needs --target model.

An experiment whose settings have a sim step also runs, right after its
model and live step, on its seed's machine: mmlab run EXPERIMENT
--target sim --machine <the seed's machine>, its document saved as
DIR/sim/EXPERIMENT.json and its output as DIR/sim/EXPERIMENT.txt. --target
model, live and both run the sim steps too unless --no-sim; --target sim
runs the sim steps alone. --machine is the model and live steps' only.

The full setting's sim steps are a sweep of independent points (each
experiment's own split, or its full setting as one point), numbered from 0
across the experiments. --points lists them on stdout, one a line (index,
experiment, machine, estimated host time, arguments; their number and
total time on stderr). --point I runs point I alone, saving
DIR/sim/EXPERIMENT.json (a Kubernetes Indexed Job passes its completion
index: deploy/README.md). mmlab report DIR... merges the points' documents
of one host into one document per experiment.

`

func runAll(ctx context.Context, args []string) int {
	return allMain(ctx, args, seeds.All(), os.Stdout, os.Stderr)
}

// allMain is mmlab all of the seeds all, printing to stdout and stderr.
func allMain(ctx context.Context, args []string, all []*seeds.Seed, stdout io.Writer, stderr *os.File) int {
	fs := flag.NewFlagSet("all", flag.ContinueOnError)
	fs.SetOutput(stderr)
	full := fs.Bool("full", false, "the seeds' own settings (long)")
	fs.Bool("quick", true, "the quick setting (the default)")
	smoke := fs.Bool("smoke", false, "the smallest setting that runs every part, in seconds (for tests: its figures say little)")
	target := fs.String("target", "both", "model, live or both (each with the sim steps unless --no-sim), or sim (the sim steps alone)")
	noSim := fs.Bool("no-sim", false, "leave out the sim steps")
	listPoints := fs.Bool("points", false, "with --full: list the sim sweep's points and exit")
	pointArg := fs.String("point", "", "with --full: run sim sweep point `I` alone (from 0; --points lists them)")
	out := fs.String("out", "", "results directory (default mmlab-results-TIME in the current directory)")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	machineName := fs.String("machine", "host", experiment.MachineUsage)
	fs.Usage = func() { fmt.Fprint(fs.Output(), allUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return flagsFailed(err, nil, nil)
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "mmlab all: "+format+"\n", a...)
		return experiment.ExitUsage
	}
	if fs.NArg() > 0 {
		return usage("unexpected argument %q", fs.Arg(0))
	}
	if err := experiment.OneOf("target", *target, "model", "live", "both", "sim"); err != nil {
		return usage("%v", err)
	}
	if *target == "sim" && *noSim {
		return usage("--target sim with --no-sim: nothing to run (--target sim runs the sim steps alone)")
	}
	mach, err := experiment.ParseMachine(*machineName)
	if err == nil && (*target == "live" || *target == "both") {
		err = experiment.HostOnly(mach)
	}
	if err != nil {
		return usage("%v", err)
	}
	setting := seeds.Quick
	switch {
	case *full && *smoke:
		return usage("--full and --smoke: choose one setting")
	case *full:
		setting = seeds.Full
	case *smoke:
		setting = seeds.Smoke
	}
	if (*listPoints || *pointArg != "") && !*full {
		return usage("--points and --point: the sweep points are the full setting's: add --full")
	}
	if *listPoints {
		var total time.Duration
		points := seeds.Points(all)
		for i, p := range points {
			fmt.Fprintf(stdout, "%d\t%s\t%s\t~%s\t%s\n", i, p.Experiment, p.Machine, p.Est.Round(time.Second), strings.Join(p.Args, " "))
			total += p.Est
		}
		fmt.Fprintf(stderr, "%d points, about %s of host time in all\n", len(points), total.Round(time.Minute))
		return experiment.ExitOK
	}
	dir := *out
	if dir == "" {
		dir = "mmlab-results-" + time.Now().Format("20060102-150405")
	}
	if *pointArg != "" {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for _, name := range []string{"target", "machine", "no-sim"} {
			if set[name] && (name != "target" || *target != "sim") {
				return usage("--point runs one sim point on its own machine: --%s does not apply", name)
			}
		}
		st, err := pointAt(seeds.Points(all), *pointArg)
		if err != nil {
			return usage("%v", err)
		}
		return runPoint(ctx, st, dir, *quiet, stdout, stderr)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(stderr, "mmlab all: --out %s: %v\n", dir, err)
		return experiment.ExitFailed
	}
	var plan []seeds.PlannedStep
	for _, st := range seeds.Plan(all, setting) {
		if st.IsSim() && !*noSim || !st.IsSim() && *target != "sim" {
			plan = append(plan, st)
		}
	}
	var total time.Duration
	for _, st := range plan {
		total += st.Est
	}
	if *full {
		fmt.Fprintf(stdout, "mmlab all --full: %d steps, about %s\n", len(plan), total.Round(time.Minute))
	}
	prog := seeds.NewProgress(stderr, *quiet, total)
	status := experiment.ExitOK
	interrupted := false
	var page report.Page
	for _, s := range all {
		for _, st := range plan {
			if st.Seed != s || interrupted {
				continue
			}
			switch code := runStep(ctx, st, *target, mach.Name, dir, prog, stderr); {
			case code == experiment.ExitInterrupted || ctx.Err() != nil:
				interrupted = true
			case code != experiment.ExitOK:
				status = experiment.ExitFailed
			}
		}
		docs, err := seeds.ReadDocs(dir)
		if err != nil {
			fmt.Fprintf(stderr, "mmlab all: %v\n", err)
			return experiment.ExitFailed
		}
		sec := s.Section(docs)
		seeds.WriteText(stdout, s, sec)
		page.Seeds = append(page.Seeds, sec)
	}
	page.Title = "mmlab: the three seeds on " + report.ThisMachine().Kernel
	page.Generated = time.Now().Format(time.RFC3339)
	page.Command = "mmlab " + strings.Join(append([]string{"all"}, args...), " ")
	page.Hosts = []report.Host{{Name: dir, Machine: report.ThisMachine(), Model: report.ModelLabel(&report.ModelMachine{Name: mach.Name, Features: mach.Features})}}
	page.Interrupted = interrupted
	if err := writeFile(filepath.Join(dir, "index.html"), func(f *os.File) error { return report.WriteHTML(f, &page) }); err != nil {
		fmt.Fprintf(stderr, "mmlab all: %v\n", err)
		return experiment.ExitFailed
	}
	fmt.Fprintf(stdout, "\nresults: %s (one JSON document per experiment, the sim steps' in %s, their tables as .txt, the report index.html)\n", dir, filepath.Join(dir, seeds.SimDir))
	if interrupted {
		fmt.Fprintln(stderr, "mmlab all: interrupted; the results and the report hold what finished")
		return experiment.ExitInterrupted
	}
	return status
}

// runStep runs the step st of the plan, its model and live steps on target
// and machine, saving its document and its output (EXPERIMENT.txt) in
// st.Dir(dir), and returns the experiment's exit status, saying on stderr
// why a step failed.
func runStep(ctx context.Context, st seeds.PlannedStep, target, machine, dir string, prog *seeds.Progress, stderr io.Writer) int {
	e := findExperiment(st.Experiment)
	if e == nil {
		fmt.Fprintf(stderr, "mmlab all: seed %s names an unknown experiment %q\n", st.Seed.ID, st.Experiment)
		return experiment.ExitFailed
	}
	logPath := filepath.Join(st.Dir(dir), st.Experiment+".txt")
	if err := os.MkdirAll(st.Dir(dir), 0o755); err != nil {
		fmt.Fprintf(stderr, "mmlab all: --out %s: %v\n", dir, err)
		return experiment.ExitFailed
	}
	log, err := os.Create(logPath)
	if err != nil {
		fmt.Fprintf(stderr, "mmlab all: %v\n", err)
		return experiment.ExitFailed
	}
	prog.Begin(st.Seed.ID, st)
	args := st.RunArgs(target, machine, dir)
	fmt.Fprintf(log, "$ mmlab run %s %s\n", st.Experiment, strings.Join(args, " "))
	code := e.Main(ctx, args, log, prog)
	log.Close()
	prog.End()
	if code != experiment.ExitOK && code != experiment.ExitInterrupted && ctx.Err() == nil {
		fmt.Fprintf(stderr, "mmlab all: %s exited %d (its output: %s)\n", st.Label(), code, logPath)
	}
	return code
}

// errNoPoint is pointAt's refusal of a --point that names no point.
var errNoPoint = errors.New("no such sweep point")

// pointAt returns the point of points that --point value names; its error
// wraps errNoPoint and names the flag, the value and the range.
func pointAt(points []seeds.PlannedStep, value string) (seeds.PlannedStep, error) {
	if len(points) == 0 {
		return seeds.PlannedStep{}, fmt.Errorf("--point %s: %w: the full setting has no sim sweep points", value, errNoPoint)
	}
	i, err := strconv.Atoi(value)
	if err != nil || i < 0 || i >= len(points) {
		return seeds.PlannedStep{}, fmt.Errorf("--point %s: %w: want one from 0 to %d (mmlab all --full --points lists them)", value, errNoPoint, len(points)-1)
	}
	return points[i], nil
}

// runPoint runs the sweep point st alone, saving in dir/sim.
func runPoint(ctx context.Context, st seeds.PlannedStep, dir string, quiet bool, stdout io.Writer, stderr *os.File) int {
	prog := seeds.NewProgress(stderr, quiet, st.Est)
	code := runStep(ctx, st, "", "", dir, prog, stderr)
	doc := filepath.Join(st.Dir(dir), st.Experiment+".json")
	fmt.Fprintf(stdout, "%s: %s (its output %s)\n", st.Label(), doc, filepath.Join(st.Dir(dir), st.Experiment+".txt"))
	if code == experiment.ExitInterrupted || ctx.Err() != nil {
		return experiment.ExitInterrupted
	}
	return code
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
host. -o defaults to the current directory. A directory's documents are
DIR/*.json and DIR/sim/*.json (the sim steps of mmlab all).

Documents of one host and one experiment that each hold a different point
of a sweep (mmlab all --full --point I, one directory per point) are merged
into one document, the results in point order and each list of params the
union of the points', before the sections are built; points whose other
params or machine differ are refused, naming both files, and so is a second
document of a point, or of an experiment that is no sweep. A sweep that
misses points is reported with the points it holds, on stderr.

Each document is checked against its experiment's types first: one of a
newer schema_version, of an experiment this mmlab does not know, or with a
field of the wrong type, missing or out of its domain (a negative time, a
count that is not a whole number) is refused with its file, the field and
what was expected, and no report is written (exit 1); with --skip-bad the
report is built from the rest. Older schema versions are read.

`

func runReport(ctx context.Context, args []string) int {
	return reportMain(args, seeds.All(), os.Stdout, os.Stderr)
}

// reportMain is mmlab report of the seeds all, printing to stdout and
// stderr.
func reportMain(args []string, all []*seeds.Seed, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", ".", "directory to write index.html to")
	skipBad := fs.Bool("skip-bad", false, "build the report from the documents read, leaving out those refused (each is still named)")
	fs.Usage = func() { fmt.Fprint(fs.Output(), reportUsage); fs.PrintDefaults() }
	paths, err := parseInterleaved(fs, args)
	if err != nil {
		return flagsFailed(err, nil, nil)
	}
	if len(paths) == 0 {
		fmt.Fprintln(stderr, "mmlab report: no results given (a directory or JSON file)")
		return experiment.ExitUsage
	}
	sets, bad, err := seeds.Load(all, paths)
	if err != nil {
		fmt.Fprintf(stderr, "mmlab report: %v\n", err)
		return experiment.ExitFailed
	}
	for _, err := range bad {
		fmt.Fprintf(stderr, "mmlab report: %v\n", err)
	}
	switch {
	case len(bad) > 0 && !*skipBad:
		fmt.Fprintf(stderr, "mmlab report: %d document(s) refused, no report written (--skip-bad builds it from the rest)\n", len(bad))
		return experiment.ExitFailed
	case len(sets) == 0:
		fmt.Fprintln(stderr, "mmlab report: every document was refused, no report written")
		return experiment.ExitFailed
	}
	for _, set := range sets {
		for _, line := range set.Incomplete() {
			fmt.Fprintf(stderr, "mmlab report: host %s: %s: the report shows the points given\n", set.Host.Name, line)
		}
	}
	page := seeds.Page(all, sets)
	page.Generated = time.Now().Format(time.RFC3339)
	page.Command = "mmlab report " + strings.Join(args, " ")
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(stderr, "mmlab report: -o %s: %v\n", *out, err)
		return experiment.ExitFailed
	}
	path := filepath.Join(*out, "index.html")
	if err := writeFile(path, func(f *os.File) error { return report.WriteHTML(f, page) }); err != nil {
		fmt.Fprintf(stderr, "mmlab report: %v\n", err)
		return experiment.ExitFailed
	}
	skipped := ""
	if len(bad) > 0 {
		skipped = fmt.Sprintf(", %d refused document(s) left out", len(bad))
	}
	fmt.Fprintf(stdout, "report: %s (%d host(s)%s)\n", path, len(sets), skipped)
	return experiment.ExitOK
}
