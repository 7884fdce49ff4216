// Package mapslock is seed 003's discriminating probe: does PROCMAP_QUERY
// wait for mmap_lock? One task write-protects a large populated region with
// mprotect, which holds the mmap lock for write while change_protection()
// walks every PTE; while it does, another task asks PROCMAP_QUERY for a VMA.
// Under the per-VMA locks of "mm/maps: execute PROCMAP_QUERY ioctl under
// per-vma locks" (Linux 6.17) a query of an unrelated VMA returns at once;
// under mmap_lock (before) it waits until mprotect drops the lock. A query
// of the VMA being changed waits in both designs (its VMA is write-locked):
// that case is the control which shows the probe really overlapped the hold.
//
// The figure of each run is whether the query returned before mprotect did,
// with the query's latency and the mprotect's hold beside it.
package mapslock

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"mmlab/experiment"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/procfs"
	"mmlab/report"
	"mmlab/uapi"
)

// Cases.
const (
	CaseOther = "query-other" // query a VMA that mprotect does not touch
	CaseSame  = "query-same"  // query the VMA being write-protected (the control)
)

// Cases lists every case in table order.
var Cases = []string{CaseOther, CaseSame}

// Options of a run.
type Options struct {
	Runs  int              `json:"runs"`
	Size  experiment.Bytes `json:"size_bytes"`
	Cases []string         `json:"cases"`
}

func (o *Options) Flags(fs *flag.FlagSet) {
	fs.IntVar(&o.Runs, "runs", o.Runs, "mprotect calls probed per case")
	experiment.Var(fs, &o.Size, "size", "bytes of the populated region mprotect write-protects (K, M, G suffixes)")
	experiment.NamesVar(fs, &o.Cases, "cases", "comma-separated cases of "+strings.Join(Cases, ", "), Cases...)
}

// MaxRuns bounds --runs.
const MaxRuns = 10000

func (o *Options) Validate() error {
	if o.Runs < 1 || o.Runs > MaxRuns {
		return fmt.Errorf("--runs %d: want 1 to %d", o.Runs, MaxRuns)
	}
	if o.Size < 16<<20 || o.Size > 64<<30 || o.Size%4096 != 0 {
		return fmt.Errorf("--size %s: want a multiple of 4K from 16M to 64G", o.Size)
	}
	return nil
}

// Run is one probed mprotect.
type Run struct {
	HoldMs float64 // how long mprotect took
	// Probed is set when a query was under way in the middle of the
	// mprotect (the window Classify uses); a run without one says nothing.
	Probed  bool
	QueryMs float64 // the median latency of those queries
	// First is set when a query both started and returned inside the
	// window: it did not wait for mprotect to end.
	First bool
}

// Span is one query, its start and end measured from the mprotect's start.
type Span struct{ Start, End time.Duration }

// Classify judges one run on either target from the mprotect's duration
// and the queries issued while it ran, by the middle eight tenths of the
// mprotect: before the first tenth the writer may not hold the lock yet,
// and a query that returns in the last tenth may have waited for the
// unlock. Under mmap_lock no query both starts and returns in the window
// (one that starts there sleeps until the unlock); under per-VMA locks a
// query of an unrelated VMA takes microseconds, so many do.
func Classify(hold time.Duration, queries []Span) Run {
	lo, hi := hold/10, hold-hold/10
	r := Run{HoldMs: ms(hold)}
	var lat []float64
	for _, q := range queries {
		if q.End < lo || q.Start > hi {
			continue
		}
		lat = append(lat, ms(q.End-q.Start))
		if q.Start >= lo && q.End <= hi {
			r.First = true
		}
	}
	if len(lat) > 0 {
		r.Probed = true
		r.QueryMs = report.Median(lat)
	}
	return r
}

// Result is one case on one target and variant.
type Result struct {
	experiment.Row
	Case         string    `json:"case"`
	SizeBytes    uint64    `json:"size_bytes"`
	HoldMs       float64   `json:"hold_ms"`
	HoldMsRuns   []float64 `json:"hold_ms_runs"`
	QueryMs      float64   `json:"query_ms"`
	QueryMsRuns  []float64 `json:"query_ms_runs"`
	First        float64   `json:"returned_first"` // share of the probed runs in which a query returned first
	FirstRuns    []bool    `json:"returned_first_runs"`
	Probed       int       `json:"probed_runs"`                          // runs in which a query was under way in the window
	QueryBlocked float64   `json:"query_blocked_mmap_lock_ms,omitempty"` // model: median time the query slept on mmap_lock
	// Machine is the simulated machine's name (sim results only).
	Machine string `json:"machine,omitempty"`
}

// Summarize fills r's figures from its runs.
func (r *Result) Summarize(runs []Run) {
	first := 0
	for _, x := range runs {
		r.HoldMsRuns = append(r.HoldMsRuns, x.HoldMs)
		if !x.Probed {
			continue
		}
		r.Probed++
		r.QueryMsRuns = append(r.QueryMsRuns, x.QueryMs)
		r.FirstRuns = append(r.FirstRuns, x.First)
		if x.First {
			first++
		}
	}
	r.HoldMs = report.Median(r.HoldMsRuns)
	if r.Probed > 0 { // else no query ran in a window: QueryMs stays 0 (JSON has no NaN)
		r.QueryMs = report.Median(r.QueryMsRuns)
		r.First = float64(first) / float64(r.Probed)
	}
}

// Verdicts.
const (
	VerdictPerVMA   = "per-vma-locks"
	VerdictMmapLock = "mmap_lock"
	VerdictUnclear  = "inconclusive"
)

// Judge says what a target's results show: VerdictPerVMA when a query of
// an unrelated VMA returned during mprotect in at least 80% of the probed
// runs and in at least 30 points more of them than the control;
// VerdictMmapLock when the unrelated query did so in at most 20%; otherwise
// VerdictUnclear (too few probed runs, or a machine too noisy to separate
// them). The control is compared, not required to wait every time: on the
// live kernel a query of the VMA being changed returns during a third to
// a half of the mprotect calls (the window also holds the writer's wait for
// mmap_lock, which no reader sees from user space).
func Judge(other, same Result) string {
	switch {
	case other.Probed*2 < len(other.HoldMsRuns) || same.Probed*2 < len(same.HoldMsRuns):
		return VerdictUnclear
	case other.First >= 0.8 && other.First-same.First >= 0.3:
		return VerdictPerVMA
	case other.First <= 0.2:
		return VerdictMmapLock
	}
	return VerdictUnclear
}

func find(rs []Result, target experiment.Target, variant, c string) (Result, bool) {
	for _, r := range rs {
		if r.Target == target && r.Variant == variant && r.Case == c {
			return r, true
		}
	}
	return Result{}, false
}

// Line is the verdict line of a target and variant, "" when a case is
// missing.
func Line(rs []Result, target experiment.Target, variant string) string {
	other, ok1 := find(rs, target, variant, CaseOther)
	same, ok2 := find(rs, target, variant, CaseSame)
	if !ok1 || !ok2 {
		return ""
	}
	v := Judge(other, same)
	what := map[string]string{
		VerdictPerVMA:   "PROCMAP_QUERY does not wait for mmap_lock (per-VMA locks)",
		VerdictMmapLock: "PROCMAP_QUERY waits for mmap_lock",
		VerdictUnclear:  "inconclusive: the probe did not separate the cases",
	}[v]
	return fmt.Sprintf("%s %s: %s: a query of another VMA returned during mprotect's %.1f ms hold in %.0f%% of %d probed runs (median %s); of the VMA being changed in %.0f%% of %d (median %s)",
		target, variant, what, other.HoldMs, 100*other.First, other.Probed, dur(other.QueryMs), 100*same.First, same.Probed, dur(same.QueryMs))
}

func table(w io.Writer, o *Options, rs []Result) {
	fmt.Fprintf(w, "mapslock: PROCMAP_QUERY while mprotect(%s) holds mmap_lock for write (median of %d runs)\n", o.Size, o.Runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "target\tvariant\tcase\thold\tquery\tprobed\treturned_first\t\n")
	for _, r := range rs {
		target := r.Target.Label(r.Machine)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%.0f%%\t\n", target, r.Variant, r.Case, dur(r.HoldMs), dur(r.QueryMs), r.Probed, len(r.HoldMsRuns), 100*r.First)
	}
	tw.Flush()
	seen := map[string]bool{}
	for _, r := range rs {
		// The live line is the verdict, printed after the table.
		if k := string(r.Target) + r.Variant; r.Target.IsModel() && !seen[k] {
			seen[k] = true
			if l := Line(rs, r.Target, r.Variant); l != "" {
				fmt.Fprintln(w, l)
			}
		}
	}
}

// verdict judges the live kernel.
func verdict(o *Options, rs []Result) (string, bool) {
	return experiment.VerdictLine(Line(rs, experiment.Live, experiment.VariantKernel)), false
}

// Def is the experiment's definition.
var Def = experiment.Def[*Options, Result]{
	Name:    "mapslock",
	Seed:    "003",
	Summary: "does PROCMAP_QUERY wait for mmap_lock while mprotect holds it for write?",
	Help: `usage: mmlab run mapslock [--target model|live|both] [--variant before|after] [--runs N] [--size BYTES] [--cases ...]

Seed 003's discriminating probe. One thread write-protects a populated
region of --size bytes with mprotect (the mmap lock is held for write while
every PTE is changed); while it runs, another asks PROCMAP_QUERY for a VMA:
query-other one that mprotect does not touch, query-same the region itself
(the control: its VMA is write-locked, so it waits in every design). With
per-VMA-lock queries (Linux 6.17+) query-other returns before mprotect does;
under mmap_lock it waits. returned_first is the share of runs in which the
query returned while mprotect was still running.
Sim (--target sim --machine NAME): the two tasks on two virtual CPUs in
virtual time; mprotect and each query pay a syscall's entry and exit, the
PTE walk a locked exchange and 20 instructions per PTE, a query 500
instructions of work (model choices).
`,
	Variants:   procfs.Variants.Names(),
	NewOptions: func() *Options { return &Options{Runs: 9, Size: 1 << 30, Cases: Cases} },
	Settings: func() experiment.Settings {
		return experiment.Settings{
			Quick:    []string{"--runs", "9", "--size", "512M"},
			Full:     []string{"--runs", "30", "--size", "4G"},
			Smoke:    []string{"--runs", "2", "--size", "64M"},
			EstQuick: 5 * time.Second, EstFull: 40 * time.Second,
		}
	},
	Model:   runModel,
	Sim:     true,
	Table:   table,
	Verdict: verdict,
}

const (
	regionBase = 0x7f0000000000
	otherBase  = 0x100000000000
)

// runModel runs the probe on the model: the region populated for write, a
// small unrelated VMA, a task that mprotects the region read-only and one
// that queries once mprotect holds the lock.
func runModel(ctx context.Context, o *Options, env experiment.Env, emit func(Result)) error {
	for _, v := range env.Variants {
		variant, err := procfs.Variants.Parse(v)
		if err != nil {
			return err
		}
		for _, c := range o.Cases {
			addr := uint64(otherBase)
			if c == CaseSame {
				addr = regionBase
			}
			var runs []Run
			var blocked []float64
			if env.Sim != nil {
				runs, blocked, err = runSim(ctx, o, env, variant, addr)
			} else {
				runs, blocked, err = runReal(ctx, o, env, variant, addr)
			}
			if err != nil {
				return err
			}
			r := Result{Row: env.Row(v), Case: c, SizeBytes: uint64(o.Size)}
			if env.Sim != nil {
				r.Machine = env.Machine.Name
			}
			r.Summarize(runs)
			r.QueryBlocked = report.Median(blocked)
			env.Progress("%s %s: hold %.2f ms, query %.3f ms, returned first %.0f%%", v, c, r.HoldMs, r.QueryMs, 100*r.First)
			emit(r)
		}
	}
	return nil
}

// newSpace maps, in a new address space of ns on features f, the region
// of size bytes populated for write and the small unrelated VMA.
func newSpace(ns *mm.Namespace, f machine.Features, size uint64) (*mm.MM, error) {
	m := mm.New(ns, f)
	rw := mm.PROT_READ | mm.PROT_WRITE
	flags := mm.MAP_PRIVATE | mm.MAP_ANONYMOUS | mm.MAP_FIXED
	if _, err := m.Mmap(nil, regionBase, size, rw, flags|mm.MAP_POPULATE, nil, 0); err != nil {
		return nil, err
	}
	if _, err := m.Mmap(nil, otherBase, 4096, rw, flags, nil, 0); err != nil {
		return nil, err
	}
	return m, nil
}

// runReal runs o.Runs probes of addr in real time, and returns each run and
// the time its queries slept on mmap_lock (ms).
func runReal(ctx context.Context, o *Options, env experiment.Env, variant procfs.Variant, addr uint64) ([]Run, []float64, error) {
	var ns kernel.Namespace // the case's address space and tasks
	m, err := newSpace(&ns.MM, env.Machine.Features, uint64(o.Size))
	if err != nil {
		return nil, nil, err
	}
	var runs []Run
	var blocked []float64
	for range o.Runs {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		run, b, err := probeModel(ctx, &ns, m, variant, addr, uint64(o.Size))
		if err != nil {
			return nil, nil, err
		}
		runs = append(runs, run)
		blocked = append(blocked, b)
	}
	return runs, blocked, nil
}

// probeModel runs one mprotect and queries in two model tasks, then puts
// the region back to read-write (which makes its PTEs writable again, so
// the next mprotect has every PTE to change). Its tasks are of ns.
func probeModel(ctx context.Context, ns *kernel.Namespace, m *mm.MM, variant procfs.Variant, addr, size uint64) (Run, float64, error) {
	var done atomic.Bool
	type call struct {
		start time.Time
		hold  time.Duration
		err   error
	}
	writerc := make(chan call, 1)
	writer := kernel.NewTask(ns, "mprotect")
	prober := kernel.NewTask(ns, "query")
	f, err := procfs.OpenMaps(m, procfs.Options{Variant: variant, Waiter: prober})
	if err != nil {
		return Run{}, 0, err
	}
	go func() {
		t0 := time.Now()
		err := m.Mprotect(writer, regionBase, size, mm.PROT_READ)
		writerc <- call{t0, time.Since(t0), err}
		done.Store(true)
	}()
	var times [][2]time.Time
	var qerr error
	for !done.Load() && ctx.Err() == nil && qerr == nil {
		q := uapi.ProcmapQuery{Size: uapi.SizeofProcmapQuery, QueryAddr: addr}
		t0 := time.Now()
		qerr = f.Query(&q, nil, nil)
		times = append(times, [2]time.Time{t0, time.Now()})
	}
	w := <-writerc
	if w.err != nil {
		return Run{}, 0, fmt.Errorf("mprotect: %w", w.err)
	}
	if qerr != nil {
		return Run{}, 0, fmt.Errorf("PROCMAP_QUERY %#x: %w", addr, qerr)
	}
	spans := make([]Span, len(times))
	for i, t := range times {
		spans[i] = Span{t[0].Sub(w.start), t[1].Sub(w.start)}
	}
	blocked := prober.TakeBlocked()[uapi.MmapLockName].Total
	if err := m.Mprotect(nil, regionBase, size, mm.PROT_READ|mm.PROT_WRITE); err != nil {
		return Run{}, 0, err
	}
	return Classify(w.hold, spans), ms(blocked), nil
}

// dur prints a time given in milliseconds with its unit.
func dur(ms float64) string {
	if ms < 1 {
		return fmt.Sprintf("%.1f us", 1000*ms)
	}
	return fmt.Sprintf("%.1f ms", ms)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
