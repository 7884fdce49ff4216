// Package forkstall is seed 000's experiment: does fork() stall while uprobes
// attach to and detach from a process that keeps its mmap_lock busy?
//
// A busy process loops mmap(SIZE, MAP_POPULATE)/munmap, a forker times every
// fork(), and a tracer attaches, holds and detaches uprobes. The figure is the
// longest fork that started inside an attach or detach window; a baseline
// window of the same length with nothing attaching follows each run. The
// cases say who maps the probed file: busy-maps (the busy process maps it;
// the forker does not), busy-forks (the busy process does not map it, and a
// second thread of it loops fork(); the forker maps it), idle-N (nobody busy,
// N processes map it; the forker does not). The modes are the registration
// paths: multi-1 and multi-4 (one BPF uprobe_multi link with 1 or 4 uprobes)
// and perf-4 (4 perf-event uprobes).
//
// This package is the experiment's one definition (Def: cases, modes,
// options, the typed result, the table and the verdict) and its model runner
// (forkstall.go). The live runner is mmlab/live/forkstall.
package forkstall

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"mmlab/experiment"
	"mmlab/kernel"
	"mmlab/report"
)

// Cases (key field "case").
const (
	CaseBusyMaps  = "busy-maps"  // the busy process maps the probed file
	CaseBusyForks = "busy-forks" // a second thread of the busy process forks; it does not map the file
	CaseIdle1000  = "idle-1000"  // nobody busy, 1000 processes map the probed file
	CaseIdle5000  = "idle-5000"
)

// Modes (key field "mode").
const (
	ModeMulti1 = "multi-1" // one uprobe_multi link with 1 uprobe
	ModeMulti4 = "multi-4" // one uprobe_multi link with 4 uprobes
	ModePerf4  = "perf-4"  // 4 perf-event uprobes
)

// Cases and Modes are every case and mode, in table order.
var (
	Cases = []string{CaseBusyMaps, CaseBusyForks, CaseIdle1000, CaseIdle5000}
	Modes = []string{ModeMulti1, ModeMulti4, ModePerf4}
)

// BusyCPU, BusyForkCPU and ForkerCPU are where both targets pin the busy
// process's populating thread, its forking thread (busy-forks) and the
// forker, modulo the machine's CPU count, each with the children it
// forks: on CPUs of their own where the machine has three, so that each
// loops as on a large machine, and the forker apart from the populate on
// a machine of two (neither target balances a CPU's load over the
// others). The tracer and the idle processes are not pinned.
const (
	BusyCPU     = 0
	ForkerCPU   = 1
	BusyForkCPU = 2
)

// Busy reports whether case c has a busy process.
func Busy(c string) bool { return c == CaseBusyMaps || c == CaseBusyForks }

// Idle returns how many idle processes map the probed file in case c.
func Idle(c string) int {
	switch c {
	case CaseIdle1000:
		return 1000
	case CaseIdle5000:
		return 5000
	}
	return 0
}

// Probes returns how many probe sites mode attaches.
func Probes(mode string) int {
	if mode == ModeMulti1 {
		return 1
	}
	return 4
}

// Def is the experiment's definition.
var Def = experiment.Def[*Options, Result]{
	Name:       "forkstall",
	Seed:       "000",
	Summary:    "does fork() stall while uprobes attach to a busy process?",
	Help:       help,
	Variants:   kernel.Designs.Names(),
	NewOptions: func() *Options { return &Options{Runs: 9, Size: 2 << 30, Modes: slices.Clone(Modes)} },
	Settings:   settings,
	Model:      Model,
	Sim:        true,
	Table:      Table,
	Verdict:    func(_ *Options, rs []Result) (string, bool) { _, line := LiveVerdict(rs); return line, false },
}

const help = `usage: mmlab run forkstall [--target model|sim|live|both] [--machine NAME] [--variant before|after] [--runs N]
                           [--size SIZE] [--cases LIST] [--modes LIST] [--full] [--json] [--out DIR]

A busy process loops mmap(SIZE, MAP_POPULATE)/munmap, a forker loops fork(),
and a tracer attaches, holds and detaches uprobes. The figure is the longest
fork() that started inside an attach or detach window (median over runs).
Cases: busy-maps (the busy process maps the probed file), busy-forks (a second
thread of the busy process forks; it does not map the file), idle-1000 and
idle-5000 (nobody busy; N processes map the file). Modes: multi-1, multi-4
(one uprobe_multi link with 1 or 4 uprobes), perf-4 (4 perf-event uprobes).
The model's busy process holds its mmap lock for read 300 ms per populate
(a time on the model's clock, not work), and the tracer starts each attach
as a populate starts.
On a simulated machine (--target sim --machine NAME) the tasks are threads on
the machine's CPUs in virtual time, placed by the simulated scheduler: the
busy process's hold is its populate's cost on that machine (populate_page
per 4 KiB page of SIZE), every system call costs the machine's syscall, and
a forked child runs, exits and is waited for.
The live run ends with "verdict: stalls|ok": stalls when the longest fork
exceeds 10x the quiet baseline (busy running, nothing attaching, same window
length) and 50 ms. Live needs Linux and root.
`

// Options are the experiment's flags; their JSON is the document's params.
type Options struct {
	Runs  int              `json:"runs"`       // attach/hold/detach cycles per case and mode
	Size  experiment.Bytes `json:"size_bytes"` // bytes the live busy process populates each cycle
	Cases []string         `json:"cases"`      // default: Cases[:3], and idle-5000 with --full
	Modes []string         `json:"modes"`

	// Set by the runs, not by flags: the model's hold of mmap_lock per
	// populate (ms), and the live run's verdict ("stalls" or "ok") and
	// line.
	ModelPopulateHoldMs float64 `json:"model_populate_hold_ms,omitempty"`
	Verdict             string  `json:"verdict,omitempty"`
	VerdictLine         string  `json:"verdict_line,omitempty"`

	full bool
}

// Flags registers the options on fs.
func (o *Options) Flags(fs *flag.FlagSet) {
	fs.IntVar(&o.Runs, "runs", o.Runs, "attach/detach cycles per case and mode (the median is reported)")
	fs.BoolVar(&o.full, "full", o.full, "also run idle-5000 (5000 processes map the probed file)")
	experiment.Var(fs, &o.Size, "size", "live: bytes the busy process populates each cycle (K, M, G suffixes)")
	experiment.NamesVar(fs, &o.Cases, "cases", "comma-separated cases (default busy-maps,busy-forks,idle-1000[,idle-5000])", Cases...)
	experiment.NamesVar(fs, &o.Modes, "modes", "comma-separated modes", Modes...)
}

// Validate checks every flag and fills the default cases.
func (o *Options) Validate() error {
	if o.Runs < 1 {
		return fmt.Errorf("--runs %d: want at least 1", o.Runs)
	}
	if o.Size == 0 {
		return fmt.Errorf("--size 0: want a positive byte count")
	}
	if o.Cases == nil {
		o.Cases = slices.Clone(Cases[:3])
		if o.full {
			o.Cases = append(o.Cases, CaseIdle5000)
		}
	}
	return nil
}

// settings are the arguments in `mmlab all`'s settings: the full one is
// the seed's table, with idle-5000 (5000 processes that map the probed
// file, about 1 MiB each, model and live) only on a host with room for
// them. A run is about 1.5 s of windows on each target, plus the model's
// calibration.
func settings() experiment.Settings {
	full := []string{"--runs", "15", "--size", "4G", "--cases", "busy-maps,busy-forks,idle-1000", "--modes", "multi-1,multi-4,perf-4"}
	if memAvailable() >= 16<<30 {
		full[5] += ",idle-5000"
	}
	return experiment.Settings{
		Quick:    []string{"--runs", "3", "--size", "512M", "--cases", "busy-maps,idle-1000", "--modes", "multi-1"},
		Full:     full,
		Smoke:    []string{"--runs", "1", "--size", "64M", "--cases", "busy-maps", "--modes", "multi-1"},
		EstQuick: 40 * time.Second, EstFull: 30 * time.Minute,
		Sim: simSettings(),
	}
}

// simSettings are the sim step's: seed 000's table on its machine. The
// full setting is the seed's own (4 GiB, every case and mode, 15 runs: the
// low end of the seed's 15-45), one point per case and mode; the quick one
// the seed's 4 GiB populate in the multi-1 rows of three cases, one run
// each (about 40 s on a 2-CPU host). The host time is mostly the forks,
// some 3·10^5 a virtual second of windows when nothing stalls them (the
// forker and its children share ForkerCPU: no cross-CPU wake-ups).
func simSettings() *experiment.SimSettings {
	full := []string{"--runs", "15", "--size", "4G", "--cases", strings.Join(Cases, ","), "--modes", strings.Join(Modes, ",")}
	var points [][]string
	for _, c := range Cases {
		for _, m := range Modes {
			points = append(points, []string{"--runs", "15", "--size", "4G", "--cases", c, "--modes", m})
		}
	}
	return &experiment.SimSettings{
		Machine:  "epyc-vm-32",
		Quick:    []string{"--runs", "1", "--size", "4G", "--cases", "busy-maps,busy-forks,idle-1000", "--modes", "multi-1"},
		Full:     full,
		Smoke:    []string{"--runs", "1", "--size", "16M", "--cases", "busy-maps", "--modes", "multi-1"},
		Points:   points,
		EstQuick: 40 * time.Second, EstFull: 90 * time.Minute,
	}
}

// memAvailable returns MemAvailable of /proc/meminfo in bytes, 0 when it
// cannot be read.
func memAvailable() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// Run is one attach/hold/detach cycle and its baseline window, on either
// target. The fields after Forks are the model's exact accounting, which the
// live kernel does not give: zero in live runs.
type Run struct {
	ForkMaxMs  float64 // longest fork that started in the attach or detach window
	AttachMs   float64
	DetachMs   float64
	BaselineMs float64 // longest fork in a window of the same length with nothing attaching
	Forks      int     // forks that started in the windows

	// Longest time one fork of the windows (and of the baseline) was
	// blocked on dup_mmap_sem and on an mmap lock.
	ForkSemMs, ForkMmapMs float64
	BaseSemMs, BaseMmapMs float64
	Passes                int64  // register_for_each_vma passes (after design)
	GCs                   uint64 // Go collections that ran inside the attach and detach windows
	// The tracer's time blocked during the attach, on dup_mmap_sem and on
	// mmap locks.
	AttachSemMs, AttachMmapMs float64
	// BusyHoldMs is the longest populate of the busy process that started
	// during the run: how long it held its mmap lock for read.
	BusyHoldMs float64
}

// Result is one case and mode on one target and variant: the median over the
// runs of each figure and the figure of every run (<key>_runs).
type Result struct {
	experiment.Row
	Case      string `json:"case"`
	Mode      string `json:"mode"`
	SizeBytes uint64 `json:"size_bytes"` // the busy process's region (the model's populate is a time); 0 in the idle cases

	ForkMaxMs      float64   `json:"fork_max_ms"`
	ForkMaxMsRuns  []float64 `json:"fork_max_ms_runs"`
	AttachMs       float64   `json:"attach_ms"`
	AttachMsRuns   []float64 `json:"attach_ms_runs"`
	DetachMs       float64   `json:"detach_ms"`
	DetachMsRuns   []float64 `json:"detach_ms_runs"`
	BaselineMs     float64   `json:"baseline_ms"`
	BaselineMsRuns []float64 `json:"baseline_ms_runs"`
	// Forks and the other float figures tagged count are medians of
	// per-run counts: whole numbers, which report.Read checks.
	Forks     float64   `json:"forks" report:"count"`
	ForksRuns []float64 `json:"forks_runs" report:"count"`

	// Verdict is a live result's Judge: "stalls" or "ok".
	Verdict string `json:"verdict,omitempty"`

	// Machine is the simulated machine's name (sim results only).
	Machine string `json:"machine,omitempty"`

	*ModelFigures // nil in live results
}

// ModelFigures are the figures only the model measures: exact blocked times,
// passes and the Go collections inside the windows.
type ModelFigures struct {
	ForkSemMs        float64   `json:"fork_blocked_dup_mmap_sem_ms"`
	ForkSemMsRuns    []float64 `json:"fork_blocked_dup_mmap_sem_ms_runs"`
	ForkMmapMs       float64   `json:"fork_blocked_mmap_lock_ms"`
	ForkMmapMsRuns   []float64 `json:"fork_blocked_mmap_lock_ms_runs"`
	BaseSemMs        float64   `json:"baseline_blocked_dup_mmap_sem_ms"`
	BaseSemMsRuns    []float64 `json:"baseline_blocked_dup_mmap_sem_ms_runs"`
	BaseMmapMs       float64   `json:"baseline_blocked_mmap_lock_ms"`
	BaseMmapMsRuns   []float64 `json:"baseline_blocked_mmap_lock_ms_runs"`
	AttachSemMs      float64   `json:"attach_blocked_dup_mmap_sem_ms"`
	AttachSemMsRuns  []float64 `json:"attach_blocked_dup_mmap_sem_ms_runs"`
	AttachMmapMs     float64   `json:"attach_blocked_mmap_lock_ms"`
	AttachMmapMsRuns []float64 `json:"attach_blocked_mmap_lock_ms_runs"`
	Passes           float64   `json:"passes" report:"count"`
	PassesRuns       []float64 `json:"passes_runs" report:"count"`
	GCs              float64   `json:"gc_in_windows" report:"count"`
	GCsRuns          []float64 `json:"gc_in_windows_runs" report:"count"`
	BusyHoldMs       float64   `json:"busy_hold_ms"`
	BusyHoldMsRuns   []float64 `json:"busy_hold_ms_runs"`
}

// NewResult summarizes the runs of case c and mode m measured where row
// says: live results get their verdict, model results their ModelFigures.
func NewResult(row experiment.Row, c, m string, size uint64, runs []Run) Result {
	col := func(f func(Run) float64) (float64, []float64) {
		xs := make([]float64, len(runs))
		for i, x := range runs {
			xs[i] = f(x)
		}
		return report.Median(xs), xs
	}
	r := Result{Row: row, Case: c, Mode: m}
	if Busy(c) {
		r.SizeBytes = size
	}
	r.ForkMaxMs, r.ForkMaxMsRuns = col(func(x Run) float64 { return x.ForkMaxMs })
	r.AttachMs, r.AttachMsRuns = col(func(x Run) float64 { return x.AttachMs })
	r.DetachMs, r.DetachMsRuns = col(func(x Run) float64 { return x.DetachMs })
	r.BaselineMs, r.BaselineMsRuns = col(func(x Run) float64 { return x.BaselineMs })
	r.Forks, r.ForksRuns = col(func(x Run) float64 { return float64(x.Forks) })
	if row.Target == experiment.Live {
		r.Verdict = Judge(r.ForkMaxMs, r.BaselineMs)
		return r
	}
	f := &ModelFigures{}
	f.ForkSemMs, f.ForkSemMsRuns = col(func(x Run) float64 { return x.ForkSemMs })
	f.ForkMmapMs, f.ForkMmapMsRuns = col(func(x Run) float64 { return x.ForkMmapMs })
	f.BaseSemMs, f.BaseSemMsRuns = col(func(x Run) float64 { return x.BaseSemMs })
	f.BaseMmapMs, f.BaseMmapMsRuns = col(func(x Run) float64 { return x.BaseMmapMs })
	f.AttachSemMs, f.AttachSemMsRuns = col(func(x Run) float64 { return x.AttachSemMs })
	f.AttachMmapMs, f.AttachMmapMsRuns = col(func(x Run) float64 { return x.AttachMmapMs })
	f.Passes, f.PassesRuns = col(func(x Run) float64 { return float64(x.Passes) })
	f.GCs, f.GCsRuns = col(func(x Run) float64 { return float64(x.GCs) })
	f.BusyHoldMs, f.BusyHoldMsRuns = col(func(x Run) float64 { return x.BusyHoldMs })
	r.ModelFigures = f
	return r
}

// Judge says whether the kernel stalls fork(): "stalls" when the longest
// fork during attach/detach is over ten times the quiet baseline and over
// 50 ms, else "ok".
func Judge(forkMaxMs, baselineMs float64) string {
	if forkMaxMs > 10*baselineMs && forkMaxMs > 50 {
		return "stalls"
	}
	return "ok"
}

// LiveVerdict judges the live results by the one with the longest fork
// (the first of them on a tie): its Judge, and the line
// "verdict: stalls|ok fork_max_ms=X baseline_ms=Y". Without live results
// both are empty. Finding a stall is the experiment's answer, not a failed
// check.
func LiveVerdict(rs []Result) (verdict, line string) {
	var worst *Result
	for i := range rs {
		if r := &rs[i]; r.Target == experiment.Live && (worst == nil || r.ForkMaxMs > worst.ForkMaxMs) {
			worst = r
		}
	}
	if worst == nil {
		return "", ""
	}
	verdict = Judge(worst.ForkMaxMs, worst.BaselineMs)
	return verdict, experiment.VerdictLine(fmt.Sprintf("%s fork_max_ms=%.2f baseline_ms=%.2f", verdict, worst.ForkMaxMs, worst.BaselineMs))
}
