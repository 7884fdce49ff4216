package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"mmlab/experiment"
	"mmlab/experiment/explorer"
	"mmlab/explore"
	"mmlab/machine"
	"mmlab/report"
)

func init() {
	register(&command{
		name:    "explore",
		summary: "search a scenario's interleavings for a failing kernel property: mmlab explore SCENARIO | --list",
		run:     runExplore,
	})
}

const exploreUsage = `usage: mmlab explore SCENARIO [--design before|after|fix|query-fix] [--strategy random|pct] [--schedules N]
                     [--seed S] [--machine NAME] [--out FILE] [--json]
       mmlab explore --replay FILE [--json]
       mmlab explore --list

Runs schedules of SCENARIO under the model's deterministic scheduler until a
property fails or N are done, checking the scenario's properties at every
scheduling decision. A failure is shrunk to a short interleaving that still
fails, printed one line per step (the task, where it went in kernel terms,
what it held), and written to --out for --replay; a copy in explore/testdata/
pins it. Schedule i runs on seed (S, i): the same seed gives the same output.
The model runs on --machine (default host: this host's features); the replay
file names it, and --replay runs on the machine its file names.

Exit status: 0 no property failed, 1 a property failed, 2 bad usage, 130
(143) interrupted by SIGINT (SIGTERM) between two schedules.

flags:
`

func runExplore(ctx context.Context, args []string) int {
	return exploreMain(ctx, args, os.Stdout, os.Stderr)
}

// exploreMain is the command, writing to out and errw; cancelling ctx
// stops the search after the schedule running.
func exploreMain(ctx context.Context, args []string, out, errw io.Writer) int {
	fs := flag.NewFlagSet("explore", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	list := fs.Bool("list", false, "print the scenarios, one a line: name, seed, what it checks")
	design := fs.String("design", "before", "the design: before or after the seed's patches; for seed 003's scenarios also fix or query-fix, the after design with a fix of the mremap gap (mremap_to gathering its destination as MAP_FIXED does, or PROCMAP_QUERY confirming an ENOENT under mmap_read_lock)")
	strategy := fs.String("strategy", "random", "how schedules choose: "+strings.Join(explore.Strategies, " or "))
	schedules := fs.Int("schedules", 100000, "schedules to run at most")
	seed := fs.Uint64("seed", 1, "seed of the schedules")
	replayFile := fs.String("replay", "", "run the interleaving of a replay file again")
	outFile := fs.String("out", "", "where to write the replay file of a failure (default explore-SCENARIO-DESIGN.replay)")
	asJSON := fs.Bool("json", false, "print a JSON document (the common schema) instead of text")
	machineName := fs.String("machine", "host", experiment.MachineUsage)
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(errw, "mmlab explore: "+format+"\n", a...)
		return experiment.ExitUsage
	}
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return flagsFailed(err, func() {
			fs.SetOutput(errw)
			fmt.Fprint(errw, exploreUsage)
			fs.PrintDefaults()
		}, func(err error) { usageErr("%v (see mmlab explore --help)", err) })
	}
	if fs.NArg() > 0 {
		if name != "" || fs.NArg() > 1 {
			return usageErr("unexpected argument %q", fs.Arg(fs.NArg()-1))
		}
		name = fs.Arg(0)
	}
	if *list {
		for _, sc := range explore.Scenarios {
			var ps []string
			for _, p := range sc.Props {
				ps = append(ps, string(p))
			}
			fmt.Fprintf(out, "%-24s seed %s  %s; checks: %s\n", sc.Name, sc.Seed, sc.Doc, strings.Join(ps, ", "))
		}
		return experiment.ExitOK
	}
	mach, err := experiment.ParseMachine(*machineName)
	if err != nil {
		return usageErr("%v", err)
	}
	if *replayFile != "" {
		set := false
		fs.Visit(func(f *flag.Flag) { set = set || f.Name == "machine" })
		if set {
			return usageErr("--machine with --replay: the replay runs on the machine its file names")
		}
		return replayExplore(*replayFile, name, *asJSON, out, errw)
	}
	if name == "" {
		return usageErr("no scenario: want one of %s (mmlab explore --list)", strings.Join(scenarioNames(), ", "))
	}
	sc := explore.Lookup(name)
	if sc == nil {
		return usageErr("unknown scenario %q: want one of %s", name, strings.Join(scenarioNames(), ", "))
	}
	d, err := explore.Designs.Parse(*design)
	if err != nil || !slices.Contains(sc.Designs(), d) {
		return usageErr("--design %q: %s runs in %s", *design, name, designNames(sc.Designs()))
	}
	if err := experiment.OneOf("strategy", *strategy, explore.Strategies...); err != nil {
		return usageErr("%v", err)
	}
	if *schedules < 1 || *schedules > explorer.MaxSchedules {
		return usageErr("--schedules %d: want 1 to %d", *schedules, explorer.MaxSchedules)
	}
	rep, err := explore.Explore(sc, explore.Options{Machine: mach, Design: d, Strategy: *strategy, Schedules: *schedules, Seed: *seed, Done: ctx.Done(),
		Progress: func(done int, el time.Duration) {
			fmt.Fprintf(errw, "explore %s %s: %d schedules, %.0f/s\n", name, d, done, float64(done)/el.Seconds())
		}})
	if err != nil {
		fmt.Fprintf(errw, "mmlab explore: %v\n", err)
		return 1
	}
	if rep.Stopped {
		fmt.Fprintf(errw, "mmlab explore: interrupted after %d of %d schedules of %s %s, no property failed in them\n",
			rep.Schedules, *schedules, name, d)
		return experiment.ExitInterrupted
	}
	res := explorer.ResultOf(rep)
	f := rep.Failure
	path := *outFile
	if f != nil {
		if path == "" {
			path = fmt.Sprintf("explore-%s-%s.replay", name, d)
		}
		pinned := explore.Pinned{Scenario: name, Machine: mach.Name, Design: d, Property: f.Violation.Property, Deviations: f.Deviations}
		if err := writeFile(path, func(f *os.File) error { return explore.WriteReplay(f, pinned) }); err != nil {
			fmt.Fprintf(errw, "mmlab explore: %v\n", err)
			return experiment.ExitFailed
		}
	}
	if *asJSON {
		doc := report.NewDocument[explorer.SearchParams, explorer.Result]("explore", mach, explorer.SearchParams{Scenario: name, Design: d.String(), Strategy: *strategy, Schedules: *schedules, Seed: *seed})
		doc.Results = append(doc.Results, res)
		if err := doc.WriteJSON(out); err != nil {
			fmt.Fprintf(errw, "mmlab explore: %v\n", err)
			return experiment.ExitFailed
		}
	} else {
		fmt.Fprintf(errw, "explore %s %s: %d schedules in %.2fs, %.0f/s\n", rep.Scenario, rep.Design, rep.Schedules,
			rep.Elapsed.Seconds(), float64(rep.Schedules)/rep.Elapsed.Seconds())
		explore.WriteReport(out, rep, path)
	}
	if f != nil {
		return experiment.ExitFailed
	}
	return experiment.ExitOK
}

func scenarioNames() []string {
	var ns []string
	for _, sc := range explore.Scenarios {
		ns = append(ns, sc.Name)
	}
	return ns
}

// replayExplore runs a replay file's interleaving again.
func replayExplore(path, name string, asJSON bool, out, errw io.Writer) int {
	fh, err := os.Open(path)
	if err != nil {
		fmt.Fprintf(errw, "mmlab explore: --replay %s: %v\n", path, err)
		return experiment.ExitUsage
	}
	p, err := explore.ReadReplay(fh)
	fh.Close()
	if err != nil {
		fmt.Fprintf(errw, "mmlab explore: --replay %s: %v\n", path, err)
		return experiment.ExitUsage
	}
	if name != "" && name != p.Scenario {
		fmt.Fprintf(errw, "mmlab explore: --replay %s is of scenario %s, not %s\n", path, p.Scenario, name)
		return experiment.ExitUsage
	}
	mach, err := machine.Lookup(p.Machine)
	if err != nil { // ReadReplay takes only machine.Names()
		fmt.Fprintf(errw, "mmlab explore: --replay %s: %v\n", path, err)
		return experiment.ExitUsage
	}
	t0 := time.Now()
	o := explore.Replay(explore.Lookup(p.Scenario), mach, p.Design, p.Deviations)
	rep := explore.Report{Scenario: p.Scenario, Machine: mach.Name, Design: p.Design, Strategy: "replay", Schedules: 1, Elapsed: time.Since(t0)}
	if o.Failed() {
		rep.Failure = &explore.Failure{Violation: o.Violation, Found: len(p.Deviations), Deviations: o.Deviations, Outcome: o}
	}
	if asJSON {
		doc := report.NewDocument[explorer.ReplayParams, explorer.Result]("explore", mach, explorer.ReplayParams{Replay: path})
		doc.Results = append(doc.Results, explorer.ResultOf(rep))
		if err := doc.WriteJSON(out); err != nil {
			fmt.Fprintf(errw, "mmlab explore: %v\n", err)
			return experiment.ExitFailed
		}
	} else {
		steps := explore.Steps(o.Record, o.Final)
		fmt.Fprintf(out, "%s (%s, machine %s): replay of %s, %d steps:\n", p.Scenario, p.Design, p.Machine, path, len(steps))
		explore.WriteInterleaving(out, steps, o.Violation)
		if !o.Failed() {
			fmt.Fprintf(out, "no property failed (the file expected: %s)\n", p.Property)
		}
	}
	if o.Failed() {
		return experiment.ExitFailed
	}
	return experiment.ExitOK
}

// designNames lists ds as "a, b or c".
func designNames(ds []explore.Design) string {
	var s []string
	for _, d := range ds {
		s = append(s, d.String())
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
