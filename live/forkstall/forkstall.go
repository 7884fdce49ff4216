// Package forkstall runs seed 000's fork-stall experiment on the live kernel:
// a busy process keeps its mmap_lock busy (mmap(SIZE, MAP_POPULATE)/munmap in
// a loop), a forker times every fork(), and this process attaches, holds and
// detaches uprobes. The longest fork that started inside an attach or detach
// window is the figure; a baseline window of the same length with nothing
// attaching, taken between the runs, gives the verdict.
//
// Kernels without the fix (register_for_each_vma sleeping on a busy mm's
// mmap_lock while it holds dup_mmap_sem for write) stall every fork() for as
// long as the busy process holds its lock.
package forkstall

import (
	"context"
	"fmt"
	"slices"
	"time"

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

// Attacher attaches the probes of mode at offsets of the executable file at
// path and returns the function that detaches them. The live uprobe package
// provides it; tests may pass their own.
type Attacher func(ctx context.Context, path string, offsets []uint64, mode string) (detach func() error, err error)

// Options describe one live run of the experiment.
type Options struct {
	Case, Mode string
	Runs       int
	Size       uint64        // bytes the busy process populates each time
	Hold       time.Duration // how long probes stay attached (200 ms in the research runs)
	Gap        time.Duration // pause after a detach and after a baseline window (500 ms)
	Attach     Attacher
	// Progress, if set, is told about each run as it ends.
	Progress func(format string, args ...any)
}

// Run is one attach/hold/detach cycle and its baseline window.
type Run struct {
	ForkMaxMs  float64 // longest fork that started in the attach or detach window
	AttachMs   float64
	DetachMs   float64
	BaselineMs float64 // longest fork in a window of the same length with nothing attaching
	Forks      int     // forks that started inside the windows
}

// Result is a whole run of one case and mode.
type Result struct {
	Case, Mode string
	Size       uint64
	Runs       []Run
}

func (r *Result) column(f func(Run) float64) []float64 {
	xs := make([]float64, len(r.Runs))
	for i, run := range r.Runs {
		xs[i] = f(run)
	}
	return xs
}

// ForkMaxMs is the median over runs of the longest fork in a window.
func (r *Result) ForkMaxMs() float64 {
	return report.Median(r.column(func(x Run) float64 { return x.ForkMaxMs }))
}

// BaselineMs is the median over runs of the longest fork in a quiet window.
func (r *Result) BaselineMs() float64 {
	return report.Median(r.column(func(x Run) float64 { return x.BaselineMs }))
}

// Verdict says whether the kernel stalls fork(): "stalls" when the longest
// fork during attach/detach is over ten times the quiet baseline and over
// 50 ms, else "ok".
func Verdict(forkMaxMs, baselineMs float64) string {
	if forkMaxMs > 10*baselineMs && forkMaxMs > 50 {
		return "stalls"
	}
	return "ok"
}

// Add appends r to doc in the common schema.
func (r *Result) Add(doc *report.MapDocument) report.Result {
	col := func(f func(Run) float64) []float64 { return r.column(f) }
	fork := col(func(x Run) float64 { return x.ForkMaxMs })
	att := col(func(x Run) float64 { return x.AttachMs })
	det := col(func(x Run) float64 { return x.DetachMs })
	base := col(func(x Run) float64 { return x.BaselineMs })
	return doc.Add(report.TargetLive, report.VariantKernel, map[string]any{
		"case": r.Case, "mode": r.Mode, "size_bytes": r.Size,
		"fork_max_ms": report.Median(fork), "fork_max_ms_runs": fork,
		"attach_ms": report.Median(att), "attach_ms_runs": att,
		"detach_ms": report.Median(det), "detach_ms_runs": det,
		"baseline_ms": report.Median(base), "baseline_ms_runs": base,
		"verdict": Verdict(report.Median(fork), report.Median(base)),
	})
}

// forkRecord is one fork() the forker timed, on CLOCK_MONOTONIC.
type forkRecord struct{ start, dur int64 }

// longestIn returns the longest fork that started in any of the windows
// [a, b) and how many started there.
func longestIn(forks []forkRecord, windows ...[2]int64) (maxNs int64, n int) {
	for _, f := range forks {
		if slices.ContainsFunc(windows, func(w [2]int64) bool { return f.start >= w[0] && f.start < w[1] }) {
			n++
			maxNs = max(maxNs, f.dur)
		}
	}
	return maxNs, n
}

// CheckCaseMode checks a case and a mode against the experiment's names; the
// model side of the experiment uses it too.
func CheckCaseMode(c, mode string) error {
	switch c {
	case CaseBusyMaps, CaseBusyForks, CaseIdle1000, CaseIdle5000:
	default:
		return fmt.Errorf("unknown case %q", c)
	}
	switch mode {
	case ModeMulti1, ModeMulti4, ModePerf4:
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	return nil
}

// Validate checks the options and fills defaults.
func (o *Options) Validate() error {
	if err := CheckCaseMode(o.Case, o.Mode); err != nil {
		return err
	}
	if o.Runs <= 0 {
		o.Runs = 9
	}
	if o.Size == 0 {
		o.Size = 2 << 30
	}
	if o.Hold == 0 {
		o.Hold = 200 * time.Millisecond
	}
	if o.Gap == 0 {
		o.Gap = 500 * time.Millisecond
	}
	if o.Attach == nil {
		return fmt.Errorf("no attacher")
	}
	return nil
}

// Probes returns how many probe sites mode attaches.
func Probes(mode string) int {
	if mode == ModeMulti1 {
		return 1
	}
	return 4
}
