// Package explorer is the experiment of the interleaving explorer
// (mmlab/explore): for each scenario and design, schedules are run until a
// property fails or the bound is reached, and the result says how many
// ran, which property failed, and how short the shrunk interleaving is.
// Before the seed's patches each seed-000 scenario should fail its
// property; after them none should.
package explorer

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"mmlab/experiment"
	"mmlab/explore"
)

// Options of a run.
type Options struct {
	Scenarios []string `json:"scenarios"`
	Schedules int      `json:"schedules"`
	Strategy  string   `json:"strategy"`
	Seed      uint64   `json:"seed"`
}

// SearchParams are the params of the document of one scenario's search
// in one design (`mmlab explore SCENARIO --json`).
type SearchParams struct {
	Scenario  string `json:"scenario"`
	Design    string `json:"design"`
	Strategy  string `json:"strategy"`
	Schedules int    `json:"schedules"`
	Seed      uint64 `json:"seed"`
}

// ReplayParams are the params of the document of a replay (`mmlab explore
// --replay FILE --json`).
type ReplayParams struct {
	Replay string `json:"replay"`
}

// MaxSchedules bounds --schedules.
const MaxSchedules = 10_000_000

// Seed000 are the names of seed 000's scenarios, the default.
func Seed000() []string {
	var ns []string
	for _, sc := range explore.Scenarios {
		if sc.Seed == "000" {
			ns = append(ns, sc.Name)
		}
	}
	return ns
}

func names() []string {
	var ns []string
	for _, sc := range explore.Scenarios {
		ns = append(ns, sc.Name)
	}
	return ns
}

func (o *Options) Flags(fs *flag.FlagSet) {
	experiment.NamesVar(fs, &o.Scenarios, "scenarios", "comma-separated scenarios of "+strings.Join(names(), ", "), names()...)
	fs.IntVar(&o.Schedules, "schedules", o.Schedules, "schedules per scenario and design, at most")
	fs.StringVar(&o.Strategy, "strategy", o.Strategy, "how schedules choose: "+strings.Join(explore.Strategies, " or "))
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the schedules (the same seed gives the same runs)")
}

func (o *Options) Validate() error {
	if o.Schedules < 1 || o.Schedules > MaxSchedules {
		return fmt.Errorf("--schedules %d: want 1 to %d", o.Schedules, MaxSchedules)
	}
	if err := experiment.OneOf("strategy", o.Strategy, explore.Strategies...); err != nil {
		return err
	}
	return nil
}

// Result is one scenario in one design (the variant).
type Result struct {
	experiment.Row
	Scenario     string `json:"scenario"`
	ScenarioSeed string `json:"scenario_seed"` // the seed the scenario belongs to
	Strategy     string `json:"strategy"`
	Seed         uint64 `json:"seed"`
	Schedules    int    `json:"schedules"` // run
	Failures     int    `json:"failures"`  // 0, or 1: exploring stops at the first
	// Of the failure: the property, the schedule that found it, its
	// deviations before and after shrinking, and the shrunk
	// interleaving's steps and deviations ("CHOICE:THREAD ...").
	Property         string  `json:"property,omitempty"`
	FoundAt          int     `json:"found_at,omitempty"`
	Deviations       int     `json:"deviations,omitempty"`
	ShrunkDeviations int     `json:"shrunk_deviations,omitempty"`
	ShrunkSteps      int     `json:"shrunk_steps,omitempty"`
	Replay           string  `json:"replay,omitempty"`
	Seconds          float64 `json:"seconds"`
	PerSecond        float64 `json:"schedules_per_s"`
}

// ResultOf turns an explorer's report into a Result.
func ResultOf(rep explore.Report) Result {
	sc := explore.Lookup(rep.Scenario)
	r := Result{Row: experiment.Row{Target: experiment.Model, Variant: rep.Design.String()},
		Scenario: rep.Scenario, ScenarioSeed: sc.Seed, Strategy: rep.Strategy, Seed: rep.Seed,
		Schedules: rep.Schedules, Seconds: rep.Elapsed.Seconds()}
	if s := rep.Elapsed.Seconds(); s > 0 {
		r.PerSecond = float64(rep.Schedules) / s
	}
	if f := rep.Failure; f != nil {
		r.Failures = 1
		r.Property = string(f.Violation.Property)
		r.FoundAt = f.Schedule
		r.Deviations = f.Found
		r.ShrunkDeviations = len(f.Deviations)
		r.ShrunkSteps = len(explore.Steps(f.Outcome.Record, f.Outcome.Final))
		r.Replay = explore.FormatDeviations(f.Deviations)
	}
	return r
}

func runModel(ctx context.Context, o *Options, env experiment.Env, emit func(Result)) error {
	for _, name := range o.Scenarios {
		sc := explore.Lookup(name)
		for _, v := range env.Variants {
			d, err := explore.Designs.Parse(v)
			if err != nil {
				return err
			}
			if !slices.Contains(sc.Designs(), d) {
				continue // a fix of the mremap gap: seed 003's scenarios alone
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			env.Progress("explore %s %s: %d schedules", name, v, o.Schedules)
			rep, err := explore.Explore(sc, explore.Options{Machine: env.Machine, Design: d, Strategy: o.Strategy, Schedules: o.Schedules, Seed: o.Seed, Done: ctx.Done()})
			if err != nil {
				return err
			}
			if rep.Stopped {
				return ctx.Err()
			}
			emit(ResultOf(rep))
		}
	}
	return nil
}

func table(w io.Writer, o *Options, rs []Result) {
	fmt.Fprintf(w, "explore: up to %d %s schedules per scenario and design, seed %d\n", o.Schedules, o.Strategy, o.Seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "scenario\tseed\tdesign\tschedules\tproperty failed\tshrunk steps\tschedules/s\t\n")
	for _, r := range rs {
		p, steps := "none", "-"
		if r.Failures > 0 {
			p, steps = r.Property, fmt.Sprint(r.ShrunkSteps)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%.0f\t\n", r.Scenario, r.ScenarioSeed, r.Variant, r.Schedules, p, steps, r.PerSecond)
	}
	tw.Flush()
}

// verdict: the check is that no property fails after the patches. The
// fixes of the mremap gap, where they ran, are counted on their own.
func verdict(_ *Options, rs []Result) (string, bool) {
	failed, ran := map[string]int{}, map[string]int{}
	var bad []string
	for _, r := range rs {
		ran[r.Variant]++
		failed[r.Variant] += r.Failures
		if r.Variant == "after" && r.Failures > 0 {
			bad = append(bad, r.Scenario+" ("+r.Property+")")
		}
	}
	after := failed["after"]
	text := fmt.Sprintf("before, %d of %d scenarios fail a property; after, %d of %d", failed["before"], ran["before"], after, ran["after"])
	for _, d := range []explore.Design{explore.Fix, explore.QueryFix} {
		if n := ran[d.String()]; n > 0 {
			text += fmt.Sprintf("; %s, %d of %d", d, failed[d.String()], n)
		}
	}
	line := experiment.VerdictLine(text)
	if after > 0 {
		line += ": " + strings.Join(bad, ", ")
	}
	return line, after > 0
}

// Def is the experiment's definition.
var Def = experiment.Def[*Options, Result]{
	Name:    "explore",
	Seed:    "000",
	Summary: "search interleavings of each scenario for a failing kernel property, before and after",
	Help: `usage: mmlab run explore [--variant before,after,fix,query-fix] [--scenarios ...] [--schedules N] [--strategy random|pct] [--seed S]

Runs up to --schedules interleavings of each scenario (by default seed 000's)
in each design under the deterministic scheduler, checking the scenario's
properties at every scheduling decision, and stops a scenario at the first
failure, which it shrinks. The designs fix and query-fix (the after design
with a fix of the mremap gap) run only seed 003's scenarios. 'mmlab explore' prints the shrunk interleaving.
`,
	Variants:   explore.Designs.Names(),
	NewOptions: func() *Options { return &Options{Scenarios: Seed000(), Schedules: 1000, Strategy: "random", Seed: 1} },
	Settings: func() experiment.Settings {
		return experiment.Settings{
			Quick:    []string{"--schedules", "2000"},
			Full:     []string{"--schedules", "100000"},
			Smoke:    []string{"--schedules", "100"},
			EstQuick: 10 * time.Second, EstFull: 20 * time.Minute,
		}
	},
	Model:   runModel,
	Table:   table,
	Verdict: verdict,
}
