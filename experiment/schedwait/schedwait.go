// Package schedwait compares the simulated scheduler's decisions with the
// running kernel's (LinSched's lesson: compare decisions, not
// throughput). On one CPU, a nice-0 task spins 2 ms of CPU time and sleeps
// 1 ms, over and over; beside it a nice-15 task runs 100 µs of CPU time and
// sleeps a seeded 0.5–4.5 ms. The figure is the distribution of the nice-15
// task's wait from its wake-up to running: in sched's sim mode on this
// host's description (its HZ, preemption model, CPU count and release's
// base slice), and on this host from a sched_wakeup / sched_switch trace.
//
// This package is the definition (Def: options, the typed result, the
// table and the verdict), the workload both sides run (HogSpin, HogSleep,
// Nice15Run, Sleeps) and the sim runner (sim.go); the live runner is
// mmlab/live/schedwait.
package schedwait

import (
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"mmlab/experiment"
)

// The workload: the nice-0 task (the hog) and the nice-15 task, both
// pinned to one CPU. Times are CPU time of the task.
const (
	HogNice    = 0
	HogSpin    = 2 * time.Millisecond
	HogSleep   = time.Millisecond
	Nice15     = 15
	Nice15Run  = 100 * time.Microsecond
	SleepMin   = 500 * time.Microsecond // the nice-15 task's sleeps: SleepMin + [0, SleepRange)
	SleepRange = 4 * time.Millisecond
)

// Sleeps returns the nice-15 task's sleeps in order, the same sequence for
// a seed on both sides (a PCG seeded (seed, 15)).
func Sleeps(seed uint64) func() time.Duration {
	rng := rand.New(rand.NewPCG(seed, Nice15))
	return func() time.Duration { return SleepMin + time.Duration(rng.Int64N(int64(SleepRange))) }
}

// VariantSim is the variant of the sim results. Until experiment has a
// sim target, this experiment's model target runs sched's sim mode (on
// the host's description), not the real-time model: its figures are
// virtual time.
const VariantSim = "sim"

// Def is the experiment's definition.
var Def = experiment.Def[*Options, Result]{
	Name:       "schedwait",
	Summary:    "the simulated scheduler against the kernel: a nice-15 task's wait beside a nice-0 task",
	Help:       help,
	Variants:   []string{VariantSim},
	NewOptions: func() *Options { return &Options{Duration: experiment.Duration(5 * time.Second), Seed: 1, CPU: -1} },
	Settings: func() experiment.Settings {
		return experiment.Settings{
			Quick: []string{"--duration", "5s"},
			Full:  []string{"--duration", "30s"},
			Smoke: []string{"--duration", "500ms"},
			// The live side runs for the duration, the sim a fraction of it.
			EstQuick: 7 * time.Second, EstFull: 35 * time.Second,
		}
	},
	Model:   RunSim,
	Table:   Table,
	Verdict: Verdict,
}

const help = `usage: mmlab run schedwait [--target model|live|both] [--duration D] [--seed N] [--cpu N]
                           [--group-nice N] [--json] [--out DIR]

On one CPU, a nice-0 task spins 2 ms of CPU time and sleeps 1 ms, and a
nice-15 task runs 100 µs of CPU time and sleeps a seeded 0.5-4.5 ms. The
figure is the nice-15 task's wait from each wake-up to running: on the
model target in sched's sim mode (Linux v6.19's fair class in virtual time)
on this host's description (HZ, preemption model, CPU count and the base
slice of its release), for --duration of virtual time; on the live target
from a private ftrace instance's sched_wakeup and sched_switch events on
this host, for --duration. "zero wait" is the share of wake-ups that ran at
once: in sim a wait of 0; live, the wake-up found the CPU idle or set
need-resched (the trace's flags) and the task was the next to run. "preempt"
is the share of those that preempted the nice-0 task; "after sleep" and
"after preempt" the shares whose wait ended when the nice-0 task slept, or
was preempted (at a tick). Live, "others" is the
share of wake-ups whose wait saw another task run on the CPU (the host's
load), and "clean p50" the median of the rest. The live helper runs in a
session, so an autogroup, of its own; --group-nice sets that group's nice
against the host's other sessions (-20 takes most of their load out of the
comparison, for a few seconds of one CPU). The verdict is the ratio of
the medians (sim / live); a ratio outside 1.5x is the answer, not a failed
check (exit 1 only when a side has no wake-ups). Every trace event names
the task current on its CPU, so the live side sees a switch the kernel did
not trace (a 6.18 KVM guest traced no switch out of the idle task on one
of its CPUs); a wake-up whose run began in one is left out, and the
verdict is then "unreliable", naming how many: another --cpu may trace
them. Live needs Linux and root.
`

// Options are the experiment's flags; their JSON is the document's params.
type Options struct {
	Duration experiment.Duration `json:"duration"` // of the live trace, and of the sim run in virtual time
	Seed     uint64              `json:"seed"`     // the nice-15 task's sleeps, and the sim's ties
	CPU      int                 `json:"cpu"`      // live: the host CPU (-1: the last one this process may use)
	// GroupNice is, live, the nice level of the helper's autogroup: the
	// helper runs in a session of its own, whose autogroup (a task group
	// of its own at the root of the CPU's run queue) competes with the
	// other sessions' at this nice (autogroup_nice). The sim has no groups
	// and no other tasks; a negative level takes the host's other load
	// out of the comparison.
	GroupNice int `json:"group_nice"`
}

// Flags registers the options on fs.
func (o *Options) Flags(fs *flag.FlagSet) {
	experiment.Var(fs, &o.Duration, "duration", "how long both tasks run (live: traced; sim: virtual time)")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the nice-15 task's sleeps (and of the sim's ties)")
	fs.IntVar(&o.CPU, "cpu", o.CPU, "live: the CPU both tasks are pinned to (-1: the last CPU this process may use)")
	fs.IntVar(&o.GroupNice, "group-nice", o.GroupNice, "live: the nice level of the helper's autogroup against the host's other sessions, -20 to 19")
}

// Validate checks every flag.
func (o *Options) Validate() error {
	if o.Duration < experiment.Duration(100*time.Millisecond) || o.Duration > experiment.Duration(10*time.Minute) {
		return fmt.Errorf("--duration %v: want 100ms to 10m", o.Duration)
	}
	if o.GroupNice < -20 || o.GroupNice > 19 {
		return fmt.Errorf("--group-nice %d: want -20 to 19", o.GroupNice)
	}
	if o.CPU < -1 || o.CPU >= 1024 {
		return fmt.Errorf("--cpu %d: want -1 (the last usable CPU) or a CPU number", o.CPU)
	}
	return nil
}

// Wake is one wake-up of the nice-15 task.
type Wake struct {
	Wait    time.Duration // from the wake-up to running
	AtOnce  bool          // it ran at its wake-up (sim: wait 0; live: idle CPU or need-resched set, next to run)
	Preempt bool          // AtOnce and it preempted the nice-0 task
	Others  bool          // live: another task ran on the CPU during the wait
	// After says what ended a wait that did not end at once: AfterSleep
	// (the nice-0 task slept), AfterPreempt (it was preempted: at a tick,
	// its slice over), AfterOther (another task, live), or "".
	After string
}

// What ends a wait (Wake.After).
const (
	AfterSleep   = "sleep"
	AfterPreempt = "preempt"
	AfterOther   = "other"
)

// Result is one target's distribution of the nice-15 task's waits.
type Result struct {
	experiment.Row
	CPU          int     `json:"cpu"` // the CPU both ran on (sim: 0)
	Wakeups      int     `json:"wakeups"`
	ZeroShare    float64 `json:"zero_wait_share"` // AtOnce wake-ups / all
	PreemptShare float64 `json:"preempt_share"`
	// Of the waits that did not end at once, the shares of all wake-ups
	// that ended when the nice-0 task slept, and when it was preempted.
	AfterSleepShare   float64 `json:"after_sleep_share"`
	AfterPreemptShare float64 `json:"after_preempt_share"` // wake-ups that preempted the nice-0 task / all
	P50US             float64 `json:"p50_us"`
	P90US             float64 `json:"p90_us"`
	P99US             float64 `json:"p99_us"`
	MaxUS             float64 `json:"max_us"`
	MeanUS            float64 `json:"mean_us"`

	*Sim  `json:"sim,omitempty"`  // nil in live results
	*Live `json:"live,omitempty"` // nil in sim results
}

// Sim is what a sim result ran on.
type Sim struct {
	Machine     string  `json:"machine"` // the description's name
	Release     string  `json:"release"`
	HZ          int     `json:"hz"`
	Preempt     string  `json:"preempt"`
	CPUs        int     `json:"cpus"` // of the simulated machine (its count sets the base slice); both tasks on CPU 0
	BaseSliceUS float64 `json:"base_slice_us"`
}

// Live is what only the live trace gives.
type Live struct {
	OthersShare float64 `json:"others_share"` // wake-ups whose wait saw another task run on the CPU
	Clean       int     `json:"clean"`        // the other wake-ups
	CleanP50US  float64 `json:"clean_p50_us"` // their median wait (0: none)
	LostEvents  int     `json:"lost_events"`
	// MissedSwitches are the switches on the CPU that the trace lacks,
	// which its other events show, and LeftOut the nice-15 task's
	// wake-ups whose run began in one, left out of the figures
	// (live/schedwait.Waits).
	MissedSwitches int    `json:"missed_switches,omitempty"`
	LeftOut        int    `json:"left_out,omitempty"`
	HogLoops       int    `json:"hog_loops"` // the nice-0 task's spin/sleep rounds
	Autogroup      string `json:"autogroup"` // the helper's, as /proc/PID/autogroup names it ("" without autogroups)
}

// Summarize returns the distribution of ws, with the row.
func Summarize(row experiment.Row, ws []Wake) Result {
	r := Result{Row: row, Wakeups: len(ws)}
	if len(ws) == 0 {
		return r // no figures: JSON has no NaN
	}
	var waits []time.Duration
	var sum time.Duration
	for _, w := range ws {
		waits = append(waits, w.Wait)
		sum += w.Wait
		if w.AtOnce {
			r.ZeroShare++
		}
		if w.Preempt {
			r.PreemptShare++
		}
		switch w.After {
		case AfterSleep:
			r.AfterSleepShare++
		case AfterPreempt:
			r.AfterPreemptShare++
		}
	}
	n := float64(len(ws))
	r.ZeroShare /= n
	r.PreemptShare /= n
	r.AfterSleepShare /= n
	r.AfterPreemptShare /= n
	slices.Sort(waits)
	r.P50US, r.P90US, r.P99US = Quantile(waits, .5), Quantile(waits, .9), Quantile(waits, .99)
	r.MaxUS = us(waits[len(waits)-1])
	r.MeanUS = us(sum) / n
	return r
}

// Quantile is the q-quantile of sorted ws in µs: the element at rank
// q·(n-1), rounded down; 0 for none.
func Quantile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return us(sorted[int(q*float64(len(sorted)-1))])
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// Tolerance is the target's bound on the ratio of the medians.
const Tolerance = 1.5

// Ratio returns the ratio of the sim's median to live's, and whether both
// are there.
func Ratio(rs []Result) (float64, bool) {
	sim, live := find(rs, experiment.Model), find(rs, experiment.Live)
	if sim == nil || live == nil || sim.Wakeups == 0 || live.Wakeups == 0 {
		return math.NaN(), false
	}
	return sim.P50US / live.P50US, true
}

func find(rs []Result, t experiment.Target) *Result {
	for i := range rs {
		if rs[i].Target == t {
			return &rs[i]
		}
	}
	return nil
}

// Verdict compares the medians: "within" or "outside" the tolerance. A
// side without wake-ups fails the run.
func Verdict(_ *Options, rs []Result) (string, bool) {
	for _, r := range rs {
		if r.Wakeups == 0 {
			return experiment.VerdictLine(fmt.Sprintf("insufficient: no wake-up of the nice-15 task on %s", r.Target)), true
		}
	}
	ratio, ok := Ratio(rs)
	if !ok {
		return "", false
	}
	if l := find(rs, experiment.Live); l.Live != nil && l.LeftOut > 0 {
		// The left-out wake-ups are the ones whose run began where the
		// trace lacks a switch: on the kernel found so, the switches out
		// of an idle CPU, so the figures lose the waits that found it idle.
		return experiment.VerdictLine(fmt.Sprintf("unreliable: the kernel's trace of CPU %d lacks %d switches, and %d of %d wake-ups with them; try another --cpu median_ratio=%.2f",
			l.CPU, l.MissedSwitches, l.LeftOut, l.Wakeups+l.LeftOut, ratio)), false
	}
	within := "within"
	if ratio > Tolerance || ratio < 1/Tolerance {
		within = "outside"
	}
	return experiment.VerdictLine(fmt.Sprintf("%s %.1fx median_ratio=%.2f sim_p50_us=%.0f live_p50_us=%.0f",
		within, Tolerance, ratio, find(rs, experiment.Model).P50US, find(rs, experiment.Live).P50US)), false
}

// Table prints one row per target and the ratio of the medians.
func Table(w io.Writer, o *Options, rs []Result) {
	fmt.Fprintf(w, "\nschedwait: the nice-15 task's wait from wake-up to running (µs), %v\n", o.Duration)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "target\tCPU\twake-ups\tzero wait\tpreempt\tafter sleep\tafter preempt\tp50\tp90\tp99\tmax\tmean\tothers\tclean p50")
	for _, r := range rs {
		name := string(r.Target)
		if r.Target == experiment.Model {
			name = "sim"
		}
		others, clean := "-", "-"
		if r.Live != nil {
			others = pct(r.OthersShare)
			if r.Clean > 0 {
				clean = num(r.CleanP50US)
			}
		}
		if r.Wakeups == 0 {
			fmt.Fprintf(tw, "%s\t%d\t0\t-\t-\t-\t-\t-\t-\t-\t-\t-\t%s\t%s\n", name, r.CPU, others, clean)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, r.CPU, r.Wakeups, pct(r.ZeroShare), pct(r.PreemptShare),
			pct(r.AfterSleepShare), pct(r.AfterPreemptShare),
			num(r.P50US), num(r.P90US), num(r.P99US), num(r.MaxUS), num(r.MeanUS), others, clean)
	}
	tw.Flush()
	var notes []string
	for _, r := range rs {
		if r.Sim != nil {
			notes = append(notes, fmt.Sprintf("sim: machine %s (release %s, HZ %d, preempt %s, %d CPUs: base slice %.0f µs)",
				r.Machine, r.Release, r.HZ, r.Preempt, r.CPUs, r.BaseSliceUS))
		}
		if r.Live != nil {
			notes = append(notes, fmt.Sprintf("live: CPU %d, %d rounds of the nice-0 task, %d trace events lost, autogroup %q", r.CPU, r.HogLoops, r.LostEvents, r.Autogroup))
			if r.MissedSwitches > 0 {
				notes = append(notes, fmt.Sprintf("live: the trace lacks switches on CPU %d that its other events show (the kernel did not trace them): %d, and %d wake-ups of the nice-15 task left out with them", r.CPU, r.MissedSwitches, r.LeftOut))
			}
		}
	}
	if ratio, ok := Ratio(rs); ok {
		notes = append(notes, fmt.Sprintf("median ratio sim/live %.2f (target within %.1fx)", ratio, Tolerance))
	}
	if len(notes) > 0 {
		fmt.Fprintln(w, strings.Join(notes, "\n"))
	}
}

func pct(x float64) string { return fmt.Sprintf("%.0f%%", 100*x) }

func num(x float64) string { return fmt.Sprintf("%.0f", x) }
