// Package attach is the experiment that times attaching and detaching N
// uprobes, the writer side of seed 004: detach waits for a grace period of
// the hit path's protection (uprobe_unregister_sync), which RCU Tasks Trace
// makes slower than SRCU. It also times the first hit of a probe on a
// 5-byte nop, which optimizes the site, against a later hit. Its model
// side attaches on model kernels of both flavours; its live side
// (mmlab/live/attach) on the running kernel.
package attach

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	"mmlab/experiment"
	"mmlab/report"
	"mmlab/uapi"
	"mmlab/uprobes"
)

// ParseModes splits a comma-separated --flag value of attach modes
// (uapi.AttachMulti, uapi.AttachPerf); "multi" is short for uprobe_multi.
func ParseModes(flagName, value string) ([]string, error) {
	modes, err := experiment.List(flagName, value, uapi.AttachMulti, uapi.AttachPerf, "multi")
	for i, m := range modes {
		if m == "multi" {
			modes[i] = uapi.AttachMulti
		}
	}
	return modes, err
}

// ModesVar defines --name, comma-separated attach modes parsed into *p by
// ParseModes.
func ModesVar(fs *flag.FlagSet, p *[]string, name, usage string) {
	experiment.ListVar(fs, p, name, usage, func(s string) ([]string, error) { return ParseModes(name, s) })
}

// MaxProbes bounds --n: the probe sites are the nops of a 64-nop sled.
const MaxProbes = 64

// Options are the options of `mmlab run attach`; their JSON is the
// document's params.
type Options struct {
	Attach []string            `json:"attach"` // modes
	N      []int               `json:"n"`      // probe counts
	Runs   int                 `json:"runs"`   // attach/detach cycles per mode and count
	Gap    experiment.Duration `json:"gap_ms"` // pause before each attach

	// Set by the model run, not by flags: its processes and CPUs.
	ModelProcs int `json:"model_procs,omitempty"`
	ModelCPUs  int `json:"model_cpus,omitempty"`
	// Set by the live run: the probed copy of the binary.
	Probed string `json:"probed,omitempty"`
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{Attach: []string{uapi.AttachMulti, uapi.AttachPerf}, N: []int{1, 4, 64}, Runs: 5, Gap: experiment.Duration(200 * time.Millisecond)}
}

// Flags registers the options on fs.
func (o *Options) Flags(fs *flag.FlagSet) {
	ModesVar(fs, &o.Attach, "attach", "comma-separated attach modes, uprobe_multi and/or perf")
	experiment.CountsVar(fs, &o.N, "n", fmt.Sprintf("comma-separated probe counts, 1 to %d", MaxProbes), 1, MaxProbes)
	fs.IntVar(&o.Runs, "runs", o.Runs, "attach/detach cycles per mode and count (the median is reported)")
	experiment.Var(fs, &o.Gap, "gap", "pause before each attach, so that every attach starts cold (0: back to back)")
}

// Validate checks every option.
func (o *Options) Validate() error {
	if o.Runs < 1 {
		return fmt.Errorf("--runs %d: want at least 1", o.Runs)
	}
	if o.Gap < 0 {
		return fmt.Errorf("--gap %v: want 0 or more", o.Gap)
	}
	return nil
}

// Result is one (target, variant, attach mode, n) cell: the runs' times.
type Result struct {
	experiment.Row
	Attach       string    `json:"attach"` // the mode
	N            int       `json:"n"`
	AttachMs     float64   `json:"attach_ms"` // median of the runs
	AttachMsRuns []float64 `json:"attach_ms_runs"`
	DetachMs     float64   `json:"detach_ms"` // median of the runs
	DetachMsRuns []float64 `json:"detach_ms_runs"`
	*FirstHit
	// Machine is the simulated machine's name (sim results only).
	Machine string `json:"machine,omitempty"`
}

// FirstHit is the first-hit optimization cost, measured after each attach
// of the cell on a probe of its own on a 5-byte nop: the first call of the
// probed function, whose int3 hit rewrites the site into a call to a
// trampoline (x86-64 since v6.18: the mmap write lock, a trampoline found
// or mapped, the checked text writes, each with a serializing IPI to every
// CPU), against a later call, which takes the optimized path.
type FirstHit struct {
	FirstHitUs     float64   `json:"first_hit_us"` // median of the runs
	FirstHitUsRuns []float64 `json:"first_hit_us_runs"`
	// HitUs is a later call: the mean of LaterHits calls in each run.
	HitUs     float64   `json:"hit_us"` // median of the runs
	HitUsRuns []float64 `json:"hit_us_runs"`
	// Optimized says whether every run's first hit left the site a call
	// into a trampoline.
	Optimized bool `json:"nop5_optimized"`
}

// LaterHits is how many calls follow the first hit in each run.
const LaterHits = 1000

// NewFirstHit summarises the first and later hits of a cell's runs (in
// µs).
func NewFirstHit(firstUs, hitUs []float64, optimized bool) *FirstHit {
	return &FirstHit{FirstHitUs: report.Median(firstUs), FirstHitUsRuns: firstUs,
		HitUs: report.Median(hitUs), HitUsRuns: hitUs, Optimized: optimized}
}

// NewResult summarises one cell's runs (in ms).
func NewResult(row experiment.Row, mode string, n int, attachMs, detachMs []float64) Result {
	return Result{Row: row, Attach: mode, N: n,
		AttachMs: report.Median(attachMs), AttachMsRuns: attachMs,
		DetachMs: report.Median(detachMs), DetachMsRuns: detachMs}
}

// Ms converts d to milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Us converts d to microseconds.
func Us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// Table prints one line per result, median and range of the runs, under a
// header for each target and variant.
func Table(w io.Writer, o *Options, rs []Result) {
	var last string
	for _, r := range rs {
		target := r.Target.Label(r.Machine)
		if key := fmt.Sprint(target, r.Variant); key != last {
			fmt.Fprintf(w, "attach/detach, %s %s (median of %v runs [min-max]; a nop5 probe's first hit, which optimizes it where the kernel does, and a later one)\n", target, r.Variant, o.Runs)
			fmt.Fprintf(w, "  %-14s %4s  %-26s %-26s %-26s %s\n", "attach", "n", "attach ms", "detach ms", "nop5 first hit us", "later hit us")
			last = key
		}
		first, later := "-", "-"
		if f := r.FirstHit; f != nil {
			first, later = cell(f.FirstHitUs, f.FirstHitUsRuns), cell(f.HitUs, f.HitUsRuns)
			if !f.Optimized {
				first += " (not optimized)"
			}
		}
		fmt.Fprintf(w, "  %-14s %4v  %-26s %-26s %-26s %s\n", r.Attach, r.N, cell(r.AttachMs, r.AttachMsRuns), cell(r.DetachMs, r.DetachMsRuns), first, later)
	}
}

func cell(med float64, runs []float64) string {
	if len(runs) == 0 {
		return fmt.Sprintf("%.3f", med)
	}
	return fmt.Sprintf("%.3f [%.3f-%.3f]", med, slices.Min(runs), slices.Max(runs))
}

// Def is the attach experiment.
var Def = experiment.Def[*Options, Result]{
	Name:    "attach",
	Seed:    "004",
	Summary: "time to attach and to detach N uprobes (uprobe_multi and perf)",
	Help: `usage: mmlab run attach [--target model|live|both] [--variant srcu,tasks-trace,v6.14+] [--n 1,4,64] [--runs R] [--attach uprobe_multi,perf] [--json]

Attaches N uprobes on N distinct nops of a sled in the mmlab binary, which the
running mmlab maps, then detaches them; times both. uprobe_multi is one link
with N offsets, perf is N perf-event uprobes each linked to the program.
Detach includes the kernel's uprobe_unregister_sync (an RCU Tasks Trace grace
period): once per link, so N times in perf mode. Attach takes dup_mmap_sem for
write; when that per-CPU rwsem has been idle, percpu_down_write() first waits
for a normal RCU grace period (rcu_sync_enter). A pause of --gap before each
attach lets that state go idle, so every attach pays it, as an agent that
attaches now and then does; with --gap 0 attach times are bimodal.
After each detach, a probe of the same mode on a 5-byte nop times the
first call of the probed function after its attach, whose hit optimizes
the site on x86-64 since 6.18 (the mmap write lock, a trampoline found or
mapped, three checked text writes each with a serializing IPI to every
CPU), against a later call (the mean of 1000), which takes the optimized
path; a process maps its trampoline once, so only its first run maps one.
Model: the same on a file that model processes map, one running through the
probed code, on the kernels of the trigger experiment (srcu, tasks-trace:
the seed's era; v6.14+: today's), with dup_mmap_sem's rcu_sync and grace
periods timed as on this kernel (HZ=250), and the same --gap before each
attach; the nop5 probe is on a file of its own, which one more process maps
and calls on model CPU 0 while the others are parked.
Sim (--target sim --machine NAME): the same on a simulated machine of 2
CPUs in virtual time, the attacher on CPU 0, the mapper that runs and the
hitter on CPU 1; grace periods timed at the machine's HZ, --gap a sleep in
virtual time; each system call of the live attach and detach (uprobe_multi:
one link; perf: a perf event and a link per probe) its entry and exit, each
registration 2,000 instructions of work, each breakpoint's page copy a
populated page (model choices).
Live needs Linux and root.
`,
	Variants:   uprobes.VariantNames(),
	NewOptions: NewOptions,
	Settings: func() experiment.Settings {
		return experiment.Settings{
			Quick:    []string{"--n", "1,4", "--runs", "3"},
			Full:     []string{"--n", "1,4,16,64", "--runs", "9"},
			Smoke:    []string{"--n", "1", "--runs", "1", "--attach", "uprobe_multi"},
			EstQuick: 10 * time.Second, EstFull: 5 * time.Minute,
		}
	},
	Model: RunModel,
	Sim:   true,
	Table: Table,
}
