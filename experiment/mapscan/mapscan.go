// Package mapscan is Paul McKenney's proc-mmap_sem-test, the benchmark of
// seed 003: a mapper keeps re-mapping (MAP_FIXED | MAP_POPULATE) or
// unmapping random pages of a 128 MiB anonymous region and times every
// call, while two scanners read its /proc/PID/maps in a loop, as text or
// with PROCMAP_QUERY. The scanners run at nice 15 on a CPU shared with a
// normal-priority busy task (spin 2 ms, sleep 1 ms), so the busy task
// preempts a scanner: with the Before walk the scanner may then hold the
// mmap read lock, and the mapper's mmap and munmap wait for the whole
// preemption (the priority inversion the seed removes); with the After walk
// it holds no lock there.
//
// The package is the experiment's one definition (Def): cases, options,
// the per-run figures (Stats, Acc), the typed result and its summary over
// runs (RunCases), the table and the verdict, and the model runner (on
// model CPUs); the live runner is mmlab/live/mapscan.
package mapscan

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"mmlab/experiment"
	"mmlab/procfs"
	"mmlab/report"
)

// Cases are the scanner kinds, the key field "scanners".
var Cases = []string{"none", "text", "query"}

// The experiment's constants, as in the seed's benchmark.
const (
	RegionSize  = 128 << 20
	PageSize    = 4096
	MapperSleep = 10 * time.Microsecond
	BusySpin    = 2 * time.Millisecond
	BusySleep   = time.Millisecond
	ScannerNice = 15
	NumScanners = 2
	WarmupOps   = 4000 // untimed operations that fragment the region first
	regionPages = RegionSize / PageSize
)

// Options are the benchmark's flags; their JSON (with the constants
// region_bytes, scanner_count and scanner_nice) is the document's params.
type Options struct {
	Runs     int           `json:"runs"` // per case
	Duration time.Duration `json:"-"`    // "duration_ms": how long the mapper is timed in each run
}

// NewOptions returns the defaults: three runs of two seconds per case.
func NewOptions() *Options { return &Options{Runs: 3, Duration: 2 * time.Second} }

// MarshalJSON adds duration_ms and the constants to the fields.
func (o Options) MarshalJSON() ([]byte, error) {
	type fields Options
	return json.Marshal(struct {
		fields
		DurationMS   int64 `json:"duration_ms"`
		RegionBytes  int   `json:"region_bytes"`
		ScannerCount int   `json:"scanner_count"`
		ScannerNice  int   `json:"scanner_nice"`
	}{fields(o), o.Duration.Milliseconds(), RegionSize, NumScanners, ScannerNice})
}

// Flags registers the options on fs.
func (o *Options) Flags(fs *flag.FlagSet) {
	fs.IntVar(&o.Runs, "runs", o.Runs, "runs per case")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "how long the mapper is timed in each run")
}

// Validate checks every option.
func (o *Options) Validate() error {
	if o.Runs < 1 {
		return fmt.Errorf("--runs %d: want 1 or more", o.Runs)
	}
	if o.Duration <= 0 {
		return fmt.Errorf("--duration %v: want more than 0", o.Duration)
	}
	return nil
}

// RunSpec sets one run.
type RunSpec struct {
	Scanners string        // one of Cases
	Duration time.Duration // how long the mapper is timed
	Seed     uint64        // of the mapper's random pages
}

// Check checks r.Scanners.
func (r RunSpec) Check() error {
	if !slices.Contains(Cases, r.Scanners) {
		return fmt.Errorf("mapscan: scanners %q: want one of %s", r.Scanners, strings.Join(Cases, ", "))
	}
	return nil
}

// Stats are one run's figures. Lock waits are the model's only.
type Stats struct {
	Ops, MmapOps, MunmapOps   int
	MmapMeanUS, MmapMaxUS     float64
	MunmapMeanUS, MunmapMaxUS float64
	OpMeanUS, OpMaxUS         float64
	LockWaitMeanUS            float64 // time blocked on any lock per op
	LockWaitMaxUS             float64
	ScanPasses                int // full scans the scanners finished
}

// Acc accumulates the mapper's timings into Stats.
type Acc struct {
	mmapSum, munmapSum, waitSum time.Duration
	mmapMax, munmapMax, waitMax time.Duration
	mmapN, munmapN              int
}

// Add records one call: mmap (else munmap) that took d, blocked wait.
func (a *Acc) Add(mmap bool, d, wait time.Duration) {
	if mmap {
		a.mmapN++
		a.mmapSum += d
		a.mmapMax = max(a.mmapMax, d)
	} else {
		a.munmapN++
		a.munmapSum += d
		a.munmapMax = max(a.munmapMax, d)
	}
	a.waitSum += wait
	a.waitMax = max(a.waitMax, wait)
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

func mean(sum time.Duration, n int) float64 {
	if n == 0 {
		return 0
	}
	return us(sum) / float64(n)
}

// Stats returns the figures so far.
func (a *Acc) Stats() Stats {
	n := a.mmapN + a.munmapN
	return Stats{
		Ops: n, MmapOps: a.mmapN, MunmapOps: a.munmapN,
		MmapMeanUS: mean(a.mmapSum, a.mmapN), MmapMaxUS: us(a.mmapMax),
		MunmapMeanUS: mean(a.munmapSum, a.munmapN), MunmapMaxUS: us(a.munmapMax),
		OpMeanUS: mean(a.mmapSum+a.munmapSum, n), OpMaxUS: us(max(a.mmapMax, a.munmapMax)),
		LockWaitMeanUS: mean(a.waitSum, n), LockWaitMaxUS: us(a.waitMax),
	}
}

// Result summarises the runs of one case on one target and variant as the
// seed does: the median of the means and the maximum of the maxima, with
// the per-run values in the *_runs lists. The lock waits are the model's
// only (absent from live results).
type Result struct {
	experiment.Row
	Scanners   string `json:"scanners"`
	Runs       int    `json:"runs"`
	Ops        int    `json:"ops"`      // timed calls, all runs
	OpsRuns    []int  `json:"ops_runs"` // per run
	ScanPasses int    `json:"scan_passes"`

	MmapMeanUS         float64   `json:"mmap_mean_us"`
	MmapMeanUSRuns     []float64 `json:"mmap_mean_us_runs"`
	MmapMaxUS          float64   `json:"mmap_max_us"`
	MmapMaxUSRuns      []float64 `json:"mmap_max_us_runs"`
	MunmapMeanUS       float64   `json:"munmap_mean_us"`
	MunmapMeanUSRuns   []float64 `json:"munmap_mean_us_runs"`
	MunmapMaxUS        float64   `json:"munmap_max_us"`
	MunmapMaxUSRuns    []float64 `json:"munmap_max_us_runs"`
	OpMeanUS           float64   `json:"op_mean_us"`
	OpMeanUSRuns       []float64 `json:"op_mean_us_runs"`
	OpMaxUS            float64   `json:"op_max_us"`
	OpMaxUSRuns        []float64 `json:"op_max_us_runs"`
	LockWaitMeanUS     *float64  `json:"lock_wait_mean_us,omitempty"`
	LockWaitMeanUSRuns []float64 `json:"lock_wait_mean_us_runs,omitempty"`
	LockWaitMaxUS      *float64  `json:"lock_wait_max_us,omitempty"`
	LockWaitMaxUSRuns  []float64 `json:"lock_wait_max_us_runs,omitempty"`
}

// Insufficient reports whether a run of r timed no call: its figures say
// nothing.
func (r Result) Insufficient() bool { return slices.Contains(r.OpsRuns, 0) }

// Summarise summarises the runs all of case scanners; the lock waits are
// kept for the model.
func Summarise(row experiment.Row, scanners string, all []Stats) Result {
	r := Result{Row: row, Scanners: scanners, Runs: len(all)}
	for _, s := range all {
		r.Ops += s.Ops
		r.OpsRuns = append(r.OpsRuns, s.Ops)
		r.ScanPasses += s.ScanPasses
	}
	type metric struct {
		v    *float64
		runs *[]float64
		of   func(Stats) float64
		max  bool // the maximum over runs, else the median
	}
	ms := []metric{
		{&r.MmapMeanUS, &r.MmapMeanUSRuns, func(s Stats) float64 { return s.MmapMeanUS }, false},
		{&r.MmapMaxUS, &r.MmapMaxUSRuns, func(s Stats) float64 { return s.MmapMaxUS }, true},
		{&r.MunmapMeanUS, &r.MunmapMeanUSRuns, func(s Stats) float64 { return s.MunmapMeanUS }, false},
		{&r.MunmapMaxUS, &r.MunmapMaxUSRuns, func(s Stats) float64 { return s.MunmapMaxUS }, true},
		{&r.OpMeanUS, &r.OpMeanUSRuns, func(s Stats) float64 { return s.OpMeanUS }, false},
		{&r.OpMaxUS, &r.OpMaxUSRuns, func(s Stats) float64 { return s.OpMaxUS }, true},
	}
	if row.Target == experiment.Model {
		r.LockWaitMeanUS, r.LockWaitMaxUS = new(float64), new(float64)
		ms = append(ms,
			metric{r.LockWaitMeanUS, &r.LockWaitMeanUSRuns, func(s Stats) float64 { return s.LockWaitMeanUS }, false},
			metric{r.LockWaitMaxUS, &r.LockWaitMaxUSRuns, func(s Stats) float64 { return s.LockWaitMaxUS }, true})
	}
	for _, m := range ms {
		xs := make([]float64, len(all))
		for i, s := range all {
			xs[i] = m.of(s)
		}
		*m.runs = xs
		if m.max {
			*m.v = report.Max(xs)
		} else {
			*m.v = report.Median(xs)
		}
	}
	return r
}

// RunCases runs o.Runs runs of each case with one (seeds 1, 2, ...) and
// emits each case's summary; a case cut short by an error or ctx is
// emitted with the runs that finished.
func RunCases(ctx context.Context, o *Options, row experiment.Row, one func(context.Context, RunSpec) (Stats, error), emit func(Result)) error {
	for _, c := range Cases {
		var all []Stats
		var err error
		for r := range o.Runs {
			var st Stats
			if st, err = one(ctx, RunSpec{Scanners: c, Duration: o.Duration, Seed: uint64(r + 1)}); err != nil {
				break
			}
			all = append(all, st)
		}
		if len(all) > 0 {
			emit(Summarise(row, c, all))
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("%s: %w", c, err)
		}
	}
	return nil
}

// Def is the experiment's definition.
var Def = experiment.Def[*Options, Result]{
	Name:    "mapscan",
	Seed:    "003",
	Summary: "mmap/munmap latency while nice-15 scanners read /proc/PID/maps (proc-mmap_sem-test)",
	Help: `usage: mmlab run mapscan [--target model|live|both] [--variant before|after]
                        [--runs N] [--duration D] [--json]

Paul McKenney's proc-mmap_sem-test, the benchmark of seed 003. A mapper
re-maps (MAP_FIXED|MAP_POPULATE) or unmaps a random page of a 128 MiB
anonymous region, sleeping 10us between calls and timing each, for
--duration. Two scanners read its /proc/PID/maps in a loop, as text in 4 KiB
read()s (scanners=text) or with PROCMAP_QUERY (scanners=query), at nice 15 on
a CPU shared with a normal-priority task that spins 2 ms and sleeps 1 ms; a
scanner preempted while it holds the mmap lock stalls the mapper.
The model runs the maps walk before seed 003 (the mmap read lock per 4 KiB
chunk) and after it (per-VMA locks); the live target runs this kernel's.
Per case: op_mean_us is the median over runs of the mean call latency,
op_max_us the maximum over runs of the maximum (the seed's summary); the
model also reports the mapper's time blocked on locks per call. A run that
timed no call makes the result insufficient (exit status 1).
`,
	Variants:   procfs.Variants,
	NewOptions: NewOptions,
	Quick:      []string{"--runs", "1", "--duration", "300ms"},
	Model:      Model,
	Table:      Table,
	Verdict:    Verdict,
}

// Table prints one row per target, variant and case, then the seed's
// comparison: the model's after against before, with text scanners.
func Table(w io.Writer, _ *Options, rs []Result) {
	fmt.Fprintf(w, "mapscan: mapper latency under /proc/PID/maps scanners (%s)\n", report.ThisMachine().Kernel)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "target\tvariant\tscanners\truns\tops\tpasses\top_mean_us\top_max_us\tmmap_mean_us\tmmap_max_us\tmunmap_mean_us\tmunmap_max_us\tlock_wait_mean_us\tlock_wait_max_us\t\n")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t", r.Target, r.Variant, r.Scanners, r.Runs, r.Ops, r.ScanPasses)
		for _, v := range []*float64{&r.OpMeanUS, &r.OpMaxUS, &r.MmapMeanUS, &r.MmapMaxUS, &r.MunmapMeanUS, &r.MunmapMaxUS, r.LockWaitMeanUS, r.LockWaitMaxUS} {
			if v != nil && r.Ops > 0 {
				fmt.Fprintf(tw, "%.1f\t", *v)
			} else {
				fmt.Fprint(tw, "-\t")
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	for _, line := range Ratios(rs) {
		fmt.Fprintln(w, line)
	}
}

// Ratios are the seed's comparison lines: op_max_us and lock_wait_max_us of
// the model, before over after, with text scanners.
func Ratios(rs []Result) []string {
	find := func(variant string) *Result {
		for i, r := range rs {
			if r.Target == experiment.Model && r.Variant == variant && r.Scanners == "text" && !r.Insufficient() {
				return &rs[i]
			}
		}
		return nil
	}
	b, a := find(procfs.Before.String()), find(procfs.After.String())
	if b == nil || a == nil {
		return nil
	}
	var lines []string
	for _, m := range []struct {
		name   string
		before float64
		after  float64
	}{{"op_max_us", b.OpMaxUS, a.OpMaxUS}, {"lock_wait_max_us", *b.LockWaitMaxUS, *a.LockWaitMaxUS}} {
		if m.after > 0 {
			lines = append(lines, fmt.Sprintf("model, text scanners: %s before/after = %.1fx", m.name, m.before/m.after))
		}
	}
	return lines
}

// Verdict says "insufficient" when a run timed no call (and fails); the
// benchmark has no other judgement.
func Verdict(_ *Options, rs []Result) (string, bool) {
	var none []string
	for _, r := range rs {
		if r.Insufficient() {
			none = append(none, fmt.Sprintf("%s %s %s", r.Target, r.Variant, r.Scanners))
		}
	}
	if len(none) > 0 {
		return "verdict: insufficient: a run timed no call in " + strings.Join(none, ", "), true
	}
	return "", false
}
