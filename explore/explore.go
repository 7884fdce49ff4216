// Package explore searches the interleavings of small programs over the
// model ("scenarios", a few tasks each, for every seed) under the
// deterministic scheduler (sched.Config.Deterministic), and checks the
// kernel's own invariants ("properties", named in kernel terms) at every
// scheduling decision: the stall chain of seed 000 as it forms, the
// registry's agreement with every mm after each register and unregister,
// a breakpoint inherited at fork, the text a killed unregister leaves, the
// gaps of a maps read, a consumer running after uprobe_unregister_sync, a
// deadlock's wait cycle.
//
// A run is one scenario in one design under a chooser: random (a uniform
// choice among the runnable tasks at every decision) or pct (probabilistic
// concurrency testing: random task priorities, highest first, with a few
// priority drops at random decisions). Whatever chose, a run is described
// by its deviations: the decisions at which it did not run the default
// task (the one that was running, if it still can; else the lowest id).
// Replaying the deviations repeats the run exactly. A failing run is
// shrunk by dropping deviations while the same property still fails
// (delta debugging), and printed as a readable interleaving, one line per
// stretch a task ran: where it went from and to, in kernel terms, and what
// it held.
//
// Mutations (for tests): each after-design fix of seed 000 can be undone
// alone by a test hook of the package that has it (kernel, uprobes), on
// the Machine or the Uprobes of each run's World (Scenario.WithSetup); the
// tests of those packages show the explorer finds each undone fix.
package explore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"mmlab/design"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/sched"
	"mmlab/uprobes"
)

// Design is the design a scenario runs in: seed 000's (kernel.Design),
// seed 003's maps walk (procfs.Before, procfs.After) or seed 004's hit-path
// protection (SRCU before, RCU Tasks Trace after). Seed 003's scenarios
// also run in the two fixes of the mremap gap (mm.GapFix), model choices
// the kernel does not make, on top of the after design: Fix
// (mm.GapFixGather) and QueryFix (mm.GapFixQueryConfirm). The zero Design
// is unset: Explore refuses it (design.ErrUnset), and a design a scenario
// does not run in (Scenario.Designs).
type Design int

const (
	Before Design = iota + 1
	After
	Fix
	QueryFix
)

// Designs are every design, before first, named "before", "after", "fix"
// and "query-fix".
var Designs = design.NewSet[Design]("design", "before", "after", "fix", "query-fix")

// String returns the design's name.
func (d Design) String() string { return Designs.String(d) }

// MarshalText returns the design's name.
func (d Design) MarshalText() ([]byte, error) { return Designs.Marshal(d) }

// UnmarshalText sets d to the design named text.
func (d *Design) UnmarshalText(text []byte) error { return Designs.Unmarshal(d, text) }

// Scenario is a small program over the model: the tasks it starts and the
// properties it checks.
type Scenario struct {
	Name  string
	Seed  string // the seed it belongs to: "000", "003", "004"
	Doc   string // what it does
	Props []Property
	// MaxSteps bounds a run's decisions (PropProgress).
	MaxSteps int
	// build makes the scenario's processes and starts its tasks on w.
	build func(w *World)
	// config is the uprobes configuration of design d (nil: seed 000's).
	config func(d Design) uprobes.Config
	// gapFixes: the scenario runs in Fix and QueryFix too (its mm is made
	// with the design's mm.GapFix).
	gapFixes bool
}

// Designs are the designs sc runs in: Before and After, and Fix and
// QueryFix for the scenarios of the mremap gap's fixes (seed 003's).
func (sc *Scenario) Designs() []Design {
	if sc.gapFixes {
		return Designs.Values()
	}
	return []Design{Before, After}
}

// checkDesign refuses an unset design (design.ErrUnset) and one sc does not
// run in (design.ErrUnknown).
func (sc *Scenario) checkDesign(d Design) error {
	if err := Designs.Check(d); err != nil {
		return err
	}
	if !slices.Contains(sc.Designs(), d) {
		return fmt.Errorf("%w: scenario %s has no %s design", design.ErrUnknown, sc.Name, d)
	}
	return nil
}

// WithSetup returns sc whose every run calls setup on its World before
// the scenario makes its processes: a test's changes to the run's kernel
// (an undone fix, a broken walk), which no other run sees. Explore, Shrink
// and Replay of the result run them all.
func (sc *Scenario) WithSetup(setup func(w *World)) *Scenario {
	c := *sc
	build := sc.build
	c.build = func(w *World) {
		setup(w)
		build(w)
	}
	return &c
}

func (sc *Scenario) uprobesConfig(d Design) uprobes.Config {
	if sc.config != nil {
		return sc.config(d)
	}
	ud := kernel.DesignBefore
	if d != Before {
		ud = kernel.DesignAfter
	}
	return uprobes.Config{Flavor: uprobes.TasksTrace, Design: ud, HitPath: uprobes.HitPathToday, Optimize: uprobes.OptimizeCall}
}

// Deviation is a decision at which a run did not run the default task:
// at the Choice-th decision that had a choice (0-based), thread Thread ran.
type Deviation struct {
	Choice int
	Thread int
}

// Outcome is how one run ended.
type Outcome struct {
	// Violation is the property that failed, nil if all held.
	Violation *Violation
	Record    *sched.Record
	// Deviations describe the run (replaying them repeats it).
	Deviations []Deviation
	// Final are the live tasks' states when the run failed.
	Final []sched.ThreadState
}

// Failed reports whether a property failed.
func (o *Outcome) Failed() bool { return o.Violation != nil }

// chooser picks the next thread; deviations are recorded around it.
type chooser interface {
	choose(k int, c sched.Choice) int
}

// defaultChoice is the task a run without deviations runs: the one that
// was running if it still can, else the lowest id.
func defaultChoice(c sched.Choice) int {
	if c.From != 0 && slices.Contains(c.Runnable, c.From) {
		return c.From
	}
	return c.Runnable[0]
}

// random chooses uniformly among the runnable tasks.
type random struct{ rng *rand.Rand }

func (r *random) choose(_ int, c sched.Choice) int { return c.Runnable[r.rng.IntN(len(c.Runnable))] }

// pct is probabilistic concurrency testing (Burckhardt et al., ASPLOS
// 2010) of depth pctDepth: each task gets a random priority when it is
// first seen, the highest-priority runnable task runs, and at pctDepth-1
// random decisions the task about to run drops below every initial
// priority.
type pct struct {
	rng    *rand.Rand
	prio   map[int]int
	change []int // decisions (choice indices) at which a priority drops
}

const pctDepth = 3

func newPCT(rng *rand.Rand, choices int) *pct {
	p := &pct{rng: rng, prio: map[int]int{}}
	for range pctDepth - 1 {
		p.change = append(p.change, rng.IntN(max(choices, 1)))
	}
	return p
}

func (p *pct) choose(k int, c sched.Choice) int {
	best := func() int {
		b := c.Runnable[0]
		for _, id := range c.Runnable {
			if _, ok := p.prio[id]; !ok {
				p.prio[id] = pctDepth + p.rng.IntN(1<<20)
			}
			if p.prio[id] > p.prio[b] {
				b = id
			}
		}
		return b
	}
	b := best()
	for i, at := range p.change {
		if at == k {
			p.prio[b] = i // below every initial priority
			b = best()
		}
	}
	return b
}

// replay runs the deviations' tasks at their decisions and the default
// elsewhere (a deviation naming a task that cannot run is skipped).
type replay struct{ at map[int]int }

func newReplay(devs []Deviation) *replay {
	r := &replay{at: map[int]int{}}
	for _, d := range devs {
		r.at[d.Choice] = d.Thread
	}
	return r
}

func (r *replay) choose(k int, c sched.Choice) int {
	if id, ok := r.at[k]; ok && slices.Contains(c.Runnable, id) {
		return id
	}
	return defaultChoice(c)
}

// run runs scenario sc once on the machine m in design d, choosing with
// ch.
func run(sc *Scenario, m machine.Description, d Design, ch chooser) Outcome {
	var devs []Deviation
	k := 0
	choose := func(c sched.Choice) int {
		id := ch.choose(k, c)
		if id != defaultChoice(c) {
			devs = append(devs, Deviation{Choice: k, Thread: id})
		}
		k++
		return id
	}
	maxSteps := sc.MaxSteps
	if maxSteps == 0 {
		maxSteps = 20000
	}
	if err := sc.checkDesign(d); err != nil {
		panic(err) // Explore and ReadReplay check the design
	}
	w, err := newWorld(m, d, sc.Props, sc.uprobesConfig(d), 2, choose, maxSteps)
	if err != nil {
		panic(err) // the scenarios' configurations are valid, and Explore and ReadReplay check the design
	}
	sc.build(w)
	rec, err := w.Sys.Run()
	w.Mach.Stop()
	o := Outcome{Record: rec, Deviations: devs, Final: w.final}
	var ce *sched.CheckError
	var de *sched.DeadlockError
	switch {
	case err == nil:
		if w.violation != nil { // found by the last task, after the last decision
			o.Violation = w.violation
		}
	case errors.As(err, &ce):
		var v *Violation
		if errors.As(ce.Err, &v) {
			o.Violation = v
		} else {
			o.Violation = &Violation{Property: PropProgress, Detail: ce.Err.Error()}
		}
	case errors.As(err, &de):
		o.Violation = &Violation{Property: PropDeadlock, Detail: de.Error()}
	case errors.Is(err, sched.ErrMaxSteps):
		o.Violation = &Violation{Property: PropProgress, Detail: fmt.Sprintf("%d decisions", maxSteps)}
	default:
		panic(fmt.Sprintf("explore: %s: %v", sc.Name, err)) // ErrSchedule: the choosers only pick runnable tasks
	}
	return o
}

// Replay runs scenario sc on the machine m in design d with deviations
// devs (a pinned interleaving).
func Replay(sc *Scenario, m machine.Description, d Design, devs []Deviation) Outcome {
	return run(sc, m, d, newReplay(devs))
}

// Strategies are the choosers Explore knows, the default first.
var Strategies = []string{"random", "pct"}

// Options configure Explore.
type Options struct {
	// Machine is the machine the model runs on; the zero Description is
	// one without any feature (no protection keys, mmap_min_addr 0).
	Machine   machine.Description
	Design    Design
	Strategy  string // "random" (default) or "pct"
	Schedules int    // how many schedules to run at most
	Seed      uint64 // schedule i runs on PCG(Seed, i)
	// Progress, if set, is called about every second with the schedules run.
	Progress func(done int, elapsed time.Duration)
	// ShrinkRuns bounds the replays of shrinking (0: 4000).
	ShrinkRuns int
	// Done, if set, stops the search when it is closed (a context's
	// Done): the schedule running ends first, and the report says Stopped.
	Done <-chan struct{}
}

// Failure is a property that failed in Explore: the schedule that found
// it, and the shrunk interleaving that still fails it.
type Failure struct {
	Schedule   int         // index of the failing schedule
	Violation  *Violation  // as the shrunk run fails
	Found      int         // deviations of the failing schedule
	Deviations []Deviation // after shrinking
	Outcome    Outcome     // the shrunk run
}

// Report is what Explore did.
type Report struct {
	Scenario  string
	Machine   string // the name of Options.Machine
	Design    Design
	Strategy  string
	Seed      uint64
	Schedules int // run
	Elapsed   time.Duration
	Failure   *Failure // nil if every schedule passed
	Stopped   bool     // Options.Done closed before Options.Schedules were run
}

// Explore runs schedules of sc until a property fails or o.Schedules are
// done; a failure is shrunk. It refuses an unset o.Design
// (design.ErrUnset) and one sc does not run in (design.ErrUnknown).
func Explore(sc *Scenario, o Options) (Report, error) {
	if err := sc.checkDesign(o.Design); err != nil {
		return Report{}, fmt.Errorf("explore: %w", err)
	}
	rep := Report{Scenario: sc.Name, Machine: o.Machine.Name, Design: o.Design, Strategy: o.Strategy, Seed: o.Seed}
	if rep.Strategy == "" {
		rep.Strategy = "random"
	}
	t0 := time.Now()
	last := t0
	choices := 100 // PCT's estimate of a run's decisions with a choice
	for i := range o.Schedules {
		select {
		case <-o.Done:
			rep.Stopped = true
		default:
		}
		if rep.Stopped {
			break
		}
		rng := rand.New(rand.NewPCG(o.Seed, uint64(i)))
		var ch chooser = &random{rng}
		if rep.Strategy == "pct" {
			ch = newPCT(rng, choices)
		}
		out := run(sc, o.Machine, o.Design, ch)
		rep.Schedules++
		choices = max(choices, countChoices(out.Record))
		if out.Failed() {
			devs, shrunk := Shrink(sc, o.Machine, o.Design, out, o.ShrinkRuns)
			rep.Failure = &Failure{Schedule: i, Violation: shrunk.Violation, Found: len(out.Deviations), Deviations: devs, Outcome: shrunk}
			break
		}
		if o.Progress != nil && time.Since(last) >= time.Second {
			last = time.Now()
			o.Progress(rep.Schedules, last.Sub(t0))
		}
	}
	rep.Elapsed = time.Since(t0)
	return rep, nil
}

func countChoices(r *sched.Record) int {
	n := 0
	for _, d := range r.Decisions {
		if d.N > 1 {
			n++
		}
	}
	return n
}

// Shrink drops deviations of the failing run out while the same property
// still fails (delta debugging: chunks, then single deviations), within
// runs replays (0: 4000). It returns the shortest deviations found and
// their run.
func Shrink(sc *Scenario, m machine.Description, d Design, failing Outcome, runs int) ([]Deviation, Outcome) {
	if runs <= 0 {
		runs = 4000
	}
	want := failing.Violation.Property
	best := failing
	// The failing run replayed from its deviations fails the same way; if
	// not (it cannot happen: runs are deterministic), keep it as it is.
	if o := Replay(sc, m, d, failing.Deviations); o.Failed() && o.Violation.Property == want {
		best = o
	}
	cur := best.Deviations
	n := 2
	for len(cur) > 0 && runs > 0 {
		chunk := (len(cur) + n - 1) / n
		reduced := false
		for start := 0; start < len(cur) && runs > 0; start += chunk {
			cand := slices.Concat(cur[:start], cur[min(start+chunk, len(cur)):])
			o := Replay(sc, m, d, cand)
			runs--
			if o.Failed() && o.Violation.Property == want {
				best, cur = o, o.Deviations
				n = max(n-1, 2)
				reduced = true
				break
			}
		}
		if !reduced {
			if chunk == 1 {
				break
			}
			n = min(2*n, len(cur))
		}
	}
	return cur, best
}
