// Package mapscan is Paul McKenney's proc-mmap_sem-test, the benchmark of
// seed 003: a mapper alone on one CPU keeps re-mapping (MAP_FIXED |
// MAP_POPULATE) or unmapping random pages of a populated 128 MiB anonymous
// region and times every call, while two scanners read its /proc/PID/maps
// in a loop, as text or with PROCMAP_QUERY. The scanners run at nice 15,
// each on a CPU of its own with a normal-priority busy-waiter (spin
// --busyduration, sleep 1 ms), as run-proc-vs-map.sh places them on the
// model (the live side too on 4 or more CPUs, else it shares one CPU
// between them), so a busy-waiter preempts a scanner: with the Before walk
// the scanner may then hold the mmap read lock, and the mapper's mmap and
// munmap wait for the whole preemption (the priority inversion the seed
// removes); with the After walk it holds at most one VMA's read lock, or
// nothing.
//
// The package is the experiment's one definition (Def): cases, options,
// the per-run figures (Stats, Acc), the typed result and its summary over
// runs (RunCases), the table and the verdict, and the model runner (on
// model CPUs); the live runner is mmlab/live/mapscan.
package mapscan

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
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
	BusySpin    = 2 * time.Millisecond // the default --busyduration (run-latency.sh's)
	BusySleep   = time.Millisecond
	ScannerNice = 15
	NumScanners = 2
	WarmupOps   = 4000 // untimed operations that fragment the region first
	regionPages = RegionSize / PageSize
	// PassCost is what a text scanner spends on its CPU between two
	// passes, holding none of the mapper's locks: scanpid.sh's bash forks
	// and execs a cat for each pass. `time (for i in $(seq 1000); do cat
	// /proc/self/stat >/dev/null; done)` takes 1.14 s on a 2-vCPU x86-64
	// VM. The live scanner runs a cat each pass; the real-time model's
	// one scanner thread spends this, a simulated scanner spends it before
	// each pass's new cat task.
	PassCost = time.Millisecond
)

// ScannerCPUs returns the CPU of each scanner and its busy-waiter on a
// machine of ncpu CPUs, the mapper being on CPU 0: with 4 or more, CPUs 2
// and 3, one scanner and one busy-waiter on each, as run-proc-vs-map.sh
// runs proc-vs-map.sh (--nbusycpus 2 --cpubusytasks 2; its script keeps
// CPU 1); with fewer, all four on CPU 1 (a choice of ours: the script
// needs 4). Both targets place them so.
func ScannerCPUs(ncpu int) []int {
	cpus := make([]int, NumScanners)
	for i := range cpus {
		cpus[i] = 1
		if ncpu >= 4 {
			cpus[i] = 2 + i
		}
	}
	return cpus
}

// Options are the benchmark's flags; their JSON (with the constants
// region_bytes, scanner_count and scanner_nice) is the document's params.
type Options struct {
	// Cases are the scanner kinds run, in the order given ("cases").
	Cases []string `json:"cases"`
	Runs  int      `json:"runs"` // per case (run-proc-vs-map.sh's --nsamples)
	// Preempt is the preemption model of the model's kernel code in the
	// walks (the live kernel's own is its boot setting).
	Preempt  procfs.Preemption   `json:"preempt"`
	Duration experiment.Duration `json:"duration_ms"` // how long the mapper is timed in each run
	// BusyDuration is how long each busy-waiter spins before it sleeps
	// BusySleep; 0 spins for ever (busywait.c's --busyduration).
	BusyDuration experiment.Duration `json:"busy_duration_ms"`
	// RawData prints, after the table, each case's per-run figures in
	// run-proc-vs-map.sh --rawdata's sorted form (not a param).
	RawData bool `json:"-"`

	// The experiment's constants, recorded for the reader; no flag sets
	// them.
	RegionBytes  int `json:"region_bytes"`
	ScannerCount int `json:"scanner_count"`
	ScannerNice  int `json:"scanner_nice"`
}

// NewOptions returns the defaults: three runs of two seconds per case,
// busy-waiters spinning 2 ms, the model without preemption in kernel code
// (the live 6.18 kernel's boot setting).
func NewOptions() *Options {
	return &Options{Cases: slices.Clone(Cases), Runs: 3, Duration: experiment.Duration(2 * time.Second), BusyDuration: experiment.Duration(BusySpin), Preempt: procfs.PreemptNone,
		RegionBytes: RegionSize, ScannerCount: NumScanners, ScannerNice: ScannerNice}
}

// Flags registers the options on fs.
func (o *Options) Flags(fs *flag.FlagSet) {
	experiment.NamesVar(fs, &o.Cases, "cases", "comma-separated scanner kinds of "+strings.Join(Cases, ", ")+" (default all)", Cases...)
	fs.IntVar(&o.Runs, "runs", o.Runs, "runs per case")
	fs.IntVar(&o.Runs, "nsamples", o.Runs, "runs per case (run-proc-vs-map.sh's name for --runs)")
	experiment.Var(fs, &o.Duration, "duration", "how long the mapper is timed in each run")
	experiment.Var(fs, &o.BusyDuration, "busyduration", "how long each busy-waiter spins before it sleeps 1ms (0: for ever)")
	experiment.Var(fs, &o.Preempt, "preempt", "model: preemption of kernel code, "+strings.Join(procfs.Preemptions, " or "))
	fs.BoolVar(&o.RawData, "rawdata", o.RawData, "print each case's per-run figures sorted, as run-proc-vs-map.sh --rawdata")
}

// Validate checks every option.
func (o *Options) Validate() error {
	if o.Runs < 1 {
		return fmt.Errorf("--runs %d: want 1 or more", o.Runs)
	}
	if o.Duration <= 0 {
		return fmt.Errorf("--duration %v: want more than 0", o.Duration)
	}
	if o.BusyDuration < 0 {
		return fmt.Errorf("--busyduration %v: want 0 (for ever) or more", o.BusyDuration)
	}
	return nil
}

// RunSpec sets one run.
type RunSpec struct {
	Scanners     string            // one of Cases
	Duration     time.Duration     // how long the mapper is timed
	Seed         uint64            // of the mapper's random pages
	BusyDuration time.Duration     // each busy-waiter's spin (0: for ever)
	Preempt      procfs.Preemption // the model's preemption of kernel code
}

// Check checks r.Scanners.
func (r RunSpec) Check() error {
	if !slices.Contains(Cases, r.Scanners) {
		return fmt.Errorf("mapscan: scanners %q: want one of %s", r.Scanners, strings.Join(Cases, ", "))
	}
	return nil
}

// Stats are one run's figures. The lock waits are the model's wait
// accounting, or on the live target the kernel's lock:contention_begin and
// lock:contention_end tracepoints (mmlab/live/mapscan): there only sleeps
// on rw_semaphores count, the mmap_lock's among them, and no preemption
// nor host wait is seen.
type Stats struct {
	Ops, MmapOps, MunmapOps   int
	MmapMeanUS, MmapMaxUS     float64
	MunmapMeanUS, MunmapMaxUS float64
	OpMeanUS, OpMaxUS         float64
	LockWaitMeanUS            float64 // time blocked on a lock per op (live: on the mmap_lock)
	LockWaitMaxUS             float64 // the longest (live: the longest single sleep on the mmap_lock)
	ScanPasses                int     // full scans the scanners finished
	// The wait accounting: the slowest call's time blocked per lock, and
	// (the model's only) the scanners' preemptions inside the walk by the
	// lock they held.
	MaxOpWaitUS map[string]float64 `json:",omitempty"`
	Preempted   Held               `json:",omitempty"`
	// SlowestWake is the live target's only: how the slowest call's
	// longest lock sleep ended (nil if the trace did not see it woken).
	SlowestWake *Wake `json:",omitempty"`
	// MaxOpNoiseUS is the sim's only: the slowest call's time lost to its
	// CPU's interruptions (machine.Noise, sched.NoiseTime).
	MaxOpNoiseUS float64 `json:",omitempty"`
	// ScannersSlept is the scanners' own lock waits: a reader granted the
	// lock while it waits for its CPU holds it all that time (the After
	// walk's fallback to the mmap lock; live: the walk's fallback
	// mmap_read_lock_killable of the mapper's mm).
	ScannersSlept Held `json:",omitempty"`
	// ScannersRunWait is, of those waits, the part after the wake-up:
	// the time a scanner waited for its CPU holding the lock.
	ScannersRunWait Held `json:",omitempty"`
	// ScannersHostWait is, of the latter, the part the scanner's OS thread
	// waited for a host CPU (the host's, not the model's).
	ScannersHostWait Held `json:",omitempty"`
	// MapperHostWaitMaxUS is the longest time the model's mapper waited
	// for a host CPU during one call, taken out of that call's time.
	MapperHostWaitMaxUS float64 `json:",omitempty"`
	// NoHostPriority says that the model's threads ran without host
	// priorities (sched.Config.HostPriority needs CAP_SYS_NICE).
	NoHostPriority bool `json:",omitempty"`
	// HostNote is, live, what else on the host takes the mapper's locks
	// (DAMON's kdamonds that are on); empty if nothing is known to.
	HostNote string `json:",omitempty"`
	// LockTraceNote says why a live run has no lock figures (the kernel's
	// lock tracepoints could not be read: no tracefs, no permission, events
	// lost); empty when it has them, and on the model.
	LockTraceNote string `json:",omitempty"`
}

// Wake is how a lock sleep of the live mapper ended, from the kernel's
// sched_waking events: the task that woke it (for an rw_semaphore, the one
// that released it), and the time from that wake-up to the mapper's
// running again.
type Wake struct {
	By        string  `json:"by"`
	RunWaitUS float64 `json:"run_wait_us"`
}

// Acc accumulates the mapper's timings into Stats.
type Acc struct {
	mmapSum, munmapSum, waitSum time.Duration
	mmapMax, munmapMax, waitMax time.Duration
	mmapN, munmapN              int
	slowest                     map[string]float64 // the slowest call's blocked time per lock
	slowestNoise                time.Duration      // the slowest call's time lost to interruptions (sim)
	hostWaitMax                 time.Duration      // Stats.MapperHostWaitMaxUS
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
		MaxOpWaitUS: a.slowest, MaxOpNoiseUS: us(a.slowestNoise), MapperHostWaitMaxUS: us(a.hostWaitMax),
	}
}

// Result summarises the runs of one case on one target and variant as the
// seed does: the median of the means and the maximum of the maxima, with
// the per-run values in the *_runs lists. The lock waits are absent from
// a live result whose runs could not all read the lock tracepoints
// (LockTraceNote says why).
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
	// OpMaxMedianUS is the median over runs of the per-run maximum.
	OpMaxMedianUS float64 `json:"op_max_median_us"`
	// The model's wait accounting: the slowest call of all runs, its time
	// blocked per lock; the scanners' preemptions inside the walk by the
	// lock held, over all runs.
	SlowestWaitUS    map[string]float64 `json:"slowest_wait_us,omitempty"`
	SlowestNoiseUS   float64            `json:"slowest_noise_us,omitempty"` // the sim's: of the slowest call, lost to interruptions
	SlowestWake      *Wake              `json:"slowest_wake,omitempty"`     // live: how its longest lock sleep ended
	ScannerPreempted Held               `json:"scanner_preempted,omitempty"`
	ScannerSlept     Held               `json:"scanner_slept,omitempty"`     // the scanners' lock waits, over all runs
	ScannerRunWait   Held               `json:"scanner_run_wait,omitempty"`  // their parts after the wake-up
	ScannerHostWait  Held               `json:"scanner_host_wait,omitempty"` // of which waiting for a host CPU
	// MapperHostWaitMaxUS is the longest wait of the model's mapper for a
	// host CPU in one call, over all runs, taken out of the call's time.
	MapperHostWaitMaxUS float64 `json:"mapper_host_wait_max_us,omitempty"`
	// NoHostPriority: a model run's threads had no host priorities.
	NoHostPriority bool `json:"no_host_priority,omitempty"`
	// HostNote and LockTraceNote are the first runs' Stats.HostNote and
	// Stats.LockTraceNote that are not empty.
	HostNote      string `json:"host_note,omitempty"`
	LockTraceNote string `json:"lock_trace_note,omitempty"`
	// Machine is the simulated machine's name (sim results only).
	Machine string `json:"machine,omitempty"`
}

// Insufficient reports whether a run of r timed no call: its figures say
// nothing.
func (r Result) Insufficient() bool { return slices.Contains(r.OpsRuns, 0) }

// Summarize summarizes the runs all of case scanners; the lock waits are
// kept for the model, and for a live case whose every run has them.
func Summarize(row experiment.Row, scanners string, all []Stats) Result {
	r := Result{Row: row, Scanners: scanners, Runs: len(all)}
	slowest := -1.0
	for _, s := range all {
		if r.LockTraceNote == "" {
			r.LockTraceNote = s.LockTraceNote
		}
		if r.HostNote == "" {
			r.HostNote = s.HostNote
		}
		r.NoHostPriority = r.NoHostPriority || s.NoHostPriority
		r.Ops += s.Ops
		r.OpsRuns = append(r.OpsRuns, s.Ops)
		r.ScanPasses += s.ScanPasses
		r.ScannerPreempted = s.Preempted.merge(r.ScannerPreempted)
		r.ScannerSlept = s.ScannersSlept.merge(r.ScannerSlept)
		r.ScannerRunWait = s.ScannersRunWait.merge(r.ScannerRunWait)
		r.ScannerHostWait = s.ScannersHostWait.merge(r.ScannerHostWait)
		r.MapperHostWaitMaxUS = max(r.MapperHostWaitMaxUS, s.MapperHostWaitMaxUS)
		if s.OpMaxUS > slowest {
			slowest, r.SlowestWaitUS, r.SlowestNoiseUS, r.SlowestWake = s.OpMaxUS, s.MaxOpWaitUS, s.MaxOpNoiseUS, s.SlowestWake
		}
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
	if row.Target.IsModel() || r.LockTraceNote == "" {
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
	r.OpMaxMedianUS = report.Median(r.OpMaxUSRuns)
	return r
}

// RunCases runs o.Runs runs of each case of o.Cases with one (seeds 1, 2, ...) and
// emits each case's summary; a case cut short by an error or ctx is
// emitted with the runs that finished.
func RunCases(ctx context.Context, o *Options, row experiment.Row, one func(context.Context, RunSpec) (Stats, error), emit func(Result)) error {
	for _, c := range o.Cases {
		var all []Stats
		var err error
		for r := range o.Runs {
			var st Stats
			spec := RunSpec{Scanners: c, Duration: o.Duration.D(), Seed: uint64(r + 1), BusyDuration: o.BusyDuration.D(), Preempt: o.Preempt}
			if st, err = one(ctx, spec); err != nil {
				break
			}
			all = append(all, st)
		}
		if len(all) > 0 {
			emit(Summarize(row, c, all))
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
	Help: `usage: mmlab run mapscan [--target model|sim|live|both] [--variant before|after]
                        [--cases none,text,query] [--runs N | --nsamples N]
                        [--duration D] [--busyduration D]
                        [--preempt none|full] [--rawdata] [--json]

Paul McKenney's proc-mmap_sem-test, the benchmark of seed 003. A mapper,
alone on CPU 0, re-maps (MAP_FIXED|MAP_POPULATE) or unmaps a random page of
a populated 128 MiB anonymous region, sleeping 10us between calls and timing
each, for --duration. Two scanners read its /proc/PID/maps in a loop, as
text in 4 KiB read()s by a new cat each pass as scanpid.sh runs them
(scanners=text; the model spends 1 ms of CPU holding no lock for each cat)
or with PROCMAP_QUERY (scanners=query), at nice 15, each with a normal-priority busy-waiter that
spins --busyduration (default 2ms, run-latency.sh's; 0 for ever, which
starves the model's scanners: its CPUs have no time slices) and sleeps
1 ms; a scanner preempted while it holds the mmap lock stalls the mapper.
The model places each scanner and its busy-waiter on a CPU of its own (CPUs
1 and 2), as run-proc-vs-map.sh does; the live target does so on CPUs 2 and
3 of a machine with 4 or more CPUs, and on fewer puts all four on CPU 1.
The model's threads take host priorities in its order where the host lets
them (as root: the mapper and the busy-waiters SCHED_FIFO, the scanners
nice 15), so that model CPUs sharing a host CPU do not delay each other's
busy-waiters.
The model runs the maps walk before seed 003 (v6.16: the mmap read lock
per 4 KiB chunk) and after it (v6.17+: per-VMA locks), with its kernel code
preempted as --preempt says: none (the default, as this 6.18 kernel boots:
a scanner is preempted only on its way back to user space) or full (also
inside the walk, holding the mmap lock or a VMA lock). The live target runs
this kernel's own walk and preemption.
Per case: op_mean_us is the median over runs of the mean call latency,
op_max_us the maximum over runs of the maximum (the seed's summary),
op_max_median_us the median of the per-run maxima; means_us and maxima_us
give their spread. The model also reports the mapper's time blocked on
locks per call, and traces the slowest call to the locks it waited for and
to the scanners preempted holding them. The live target gives the same
figures from the kernel's lock:contention_begin/end tracepoints (a private
ftrace instance; needs root and tracefs, else the line says "no lock
tracepoints"): the mapper's and the scanners' sleeps on the mapper's
mmap_lock and the mapper's on other rw_semaphores, not its per-VMA lock
waits nor preemption, and from sched_waking which task woke the slowest
call's longest sleep (the lock's releaser) and how long the mapper then
waited for its CPU. --rawdata prints each case's runs as
run-proc-vs-map.sh --rawdata does: in ms, the median of the per-run means,
the j-th smallest per-run mean, the j-th smallest per-run max.
On --target sim (--machine virtme-ng-4, seed 003's 4-CPU VM) each run is
a simulated machine of its own in virtual time, placed as
run-proc-vs-map.sh places its tasks (mapper CPU 0, CPU 1 idle, a scanner
and a busy-waiter on each of CPUs 2 and 3), scheduled by EEVDF (the
nice-15 scanner gets its weight's share), the walk preempted as the
machine's preemption model says (not --preempt); the calls and reads are
charged the machine's syscall and populate costs and instruction counts
(RunSim says which), and the slowest call names the part of it its CPU's
interruptions took (the machine's noise). The same machine and --sim-seed
give the same output.
A run that timed no call makes the result insufficient (exit status 1).
`,
	Variants:   procfs.Variants.Names(),
	NewOptions: NewOptions,
	Settings: func() experiment.Settings {
		return experiment.Settings{
			Quick:    []string{"--runs", "3", "--duration", "500ms"},
			Full:     []string{"--runs", "30", "--duration", "10s"},
			Smoke:    []string{"--runs", "1", "--duration", "100ms"},
			EstQuick: 8 * time.Second, EstFull: 50 * time.Minute,
			// The seed's run-proc-vs-map.sh --nsamples 100 --rawdata --
			// --busyduration 2 on its 4-CPU VM, text scanners, both
			// designs; quick with 3 samples of 2 s. The estimates are
			// of a 2-core host at about 1.1 s of CPU per simulated
			// second (0.85-2.2 s of wall time, as the host is loaded).
			Sim: &experiment.SimSettings{
				Machine:  "virtme-ng-4",
				Quick:    []string{"--cases", "text", "--nsamples", "3", "--duration", "2s", "--busyduration", "2ms", "--rawdata"},
				Full:     []string{"--cases", "text", "--nsamples", "100", "--duration", "10s", "--busyduration", "2ms", "--rawdata"},
				Smoke:    []string{"--cases", "text", "--nsamples", "1", "--duration", "100ms", "--busyduration", "2ms", "--rawdata"},
				EstQuick: 15 * time.Second, EstFull: 40 * time.Minute,
			},
		}
	},
	Model:   Model,
	Sim:     true,
	Table:   Table,
	Verdict: Verdict,
}

// Table prints one row per target, variant and case, with the spread of
// the per-run means and maxima, then the seed's comparison (the model's
// after against before, with text scanners), the model's wait accounting,
// and with o.RawData each case's raw data.
func Table(w io.Writer, o *Options, rs []Result) {
	fmt.Fprintf(w, "mapscan: mapper latency under /proc/PID/maps scanners (%s)\n", report.ThisMachine().Kernel)
	for _, r := range rs {
		if r.Machine != "" {
			fmt.Fprintf(w, "sim: on the simulated machine %s (mmlab machines describes it)\n", r.Machine)
			break
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "target\tvariant\tscanners\truns\tops\tpasses\top_mean_us\tmeans_us\top_max_us\top_max_median_us\tmaxima_us\tmmap_max_us\tmunmap_max_us\tlock_wait_mean_us\tlock_wait_max_us\t\n")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t", r.Target, r.Variant, r.Scanners, r.Runs, r.Ops, r.ScanPasses)
		cell := func(v *float64) {
			if v != nil && r.Ops > 0 {
				fmt.Fprintf(tw, "%.1f\t", *v)
			} else {
				fmt.Fprint(tw, "-\t")
			}
		}
		cell(&r.OpMeanUS)
		fmt.Fprintf(tw, "%s\t", spread(r.OpMeanUSRuns))
		cell(&r.OpMaxUS)
		cell(&r.OpMaxMedianUS)
		fmt.Fprintf(tw, "%s\t", spread(r.OpMaxUSRuns))
		for _, v := range []*float64{&r.MmapMaxUS, &r.MunmapMaxUS, r.LockWaitMeanUS, r.LockWaitMaxUS} {
			cell(v)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	for _, line := range Ratios(rs) {
		fmt.Fprintln(w, line)
	}
	var notes []string
	for _, r := range rs {
		if line := Attribution(r); line != "" {
			fmt.Fprintln(w, line)
		}
		if r.HostNote != "" && !slices.Contains(notes, r.HostNote) {
			notes = append(notes, r.HostNote)
		}
	}
	for _, n := range notes {
		fmt.Fprintf(w, "live: %s\n", n)
	}
	if o != nil && o.RawData {
		for _, r := range rs {
			fmt.Fprintf(w, "rawdata %s %s %s (ms: median of per-run means, j-th smallest per-run mean, j-th smallest per-run max)\n", r.Target, r.Variant, r.Scanners)
			for _, line := range RawData(r) {
				fmt.Fprintln(w, line)
			}
		}
	}
}

// spread is the range of per-run values, "lo-hi".
func spread(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f-%.1f", slices.Min(xs), slices.Max(xs))
}

// RawData is run-proc-vs-map.sh --rawdata for r: one line per run, three
// columns in ms: the median of the per-run means (the same on every line),
// the j-th smallest per-run mean, the j-th smallest per-run max (the two
// sorted independently, so a line is not one run).
func RawData(r Result) []string {
	means, maxes := slices.Sorted(slices.Values(r.OpMeanUSRuns)), slices.Sorted(slices.Values(r.OpMaxUSRuns))
	lines := make([]string, len(means))
	for j := range means {
		lines[j] = fmt.Sprintf("%.3f %.3f %.3f", r.OpMeanUS/1e3, means[j]/1e3, maxes[j]/1e3)
	}
	return lines
}

// Attribution traces r's slowest call to the locks it waited for, and
// those to the scanners preempted holding them or granted them while they
// waited for their CPU: the model's wait accounting, or the live kernel's
// lock tracepoints (sleeps on rw_semaphores only: no preemption, no
// per-VMA lock wait, no optimistic spinning). Empty for runs that timed no
// call. A slowest call that blocked on no lock lost its time elsewhere
// (the model: the host's scheduling of its threads; sim: the part its
// CPU's interruptions took is named; live: the kernel's work, preemption,
// or a lock the tracepoints do not show).
func Attribution(r Result) string {
	if r.Ops == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s: slowest call %.1f us", r.Target, r.Variant, r.Scanners, r.OpMaxUS)
	if !r.Target.IsModel() && r.LockTraceNote != "" {
		fmt.Fprintf(&b, "; %s", r.LockTraceNote)
		return b.String()
	}
	b.WriteString(", blocked")
	if len(r.SlowestWaitUS) == 0 {
		b.WriteString(" on no lock")
	}
	for _, lock := range slices.Sorted(maps.Keys(r.SlowestWaitUS)) {
		fmt.Fprintf(&b, " %.1f us on %s", r.SlowestWaitUS[lock], lock)
	}
	if w := r.SlowestWake; w != nil {
		fmt.Fprintf(&b, " (the longest sleep woken by %s, then %.1f us until the mapper ran)", w.By, w.RunWaitUS)
	}
	if r.SlowestNoiseUS > 0 {
		fmt.Fprintf(&b, ", %.1f us of it interrupted (the machine's noise)", r.SlowestNoiseUS)
	}
	if len(r.ScannerPreempted) > 0 {
		b.WriteString("; scanners preempted in the walk holding")
		for _, lock := range slices.Sorted(maps.Keys(r.ScannerPreempted)) {
			hs := r.ScannerPreempted[lock]
			fmt.Fprintf(&b, " %s %d times (longest %.1f us)", lock, hs.Count, hs.MaxUS)
		}
	}
	if len(r.ScannerSlept) > 0 {
		b.WriteString("; scanners slept on")
		for _, lock := range slices.Sorted(maps.Keys(r.ScannerSlept)) {
			hs := r.ScannerSlept[lock]
			switch r.Target {
			case experiment.Model:
				fmt.Fprintf(&b, " %s %d times (longest %.1f us, granted at the end and held until they ran; up to %.1f us of a sleep after the wake-up, waiting for their CPU, %.1f us of it for a host CPU)", lock, hs.Count, hs.MaxUS, r.ScannerRunWait[lock].MaxUS, r.ScannerHostWait[lock].MaxUS)
			case experiment.Sim:
				// A sim sleep ends when the sleeper runs: its wait for
				// the CPU is inside it.
				fmt.Fprintf(&b, " %s %d times (longest %.1f us to the CPU, granted at the wake-up and held until they ran)", lock, hs.Count, hs.MaxUS)
			default:
				fmt.Fprintf(&b, " %s %d times (longest %.1f us)", lock, hs.Count, hs.MaxUS)
			}
		}
	}
	if r.MapperHostWaitMaxUS > 0 {
		fmt.Fprintf(&b, "; the mapper's waits for a host CPU (up to %.1f us in one call) are left out of the calls' times, not of their lock waits", r.MapperHostWaitMaxUS)
	}
	if r.NoHostPriority {
		b.WriteString("; the model's threads had no host priorities (CAP_SYS_NICE), so a busy-waiter's host wake-up could wait behind the other scanner CPU's thread")
	}
	if !r.Target.IsModel() {
		b.WriteString(" (the kernel's lock:contention tracepoints: rw_semaphore sleeps only)")
	}
	return b.String()
}

// Ratios are the seed's comparison lines: op_max_us (the maximum of the
// maxima), op_max_median_us (the median of the per-run maxima) and
// lock_wait_max_us of the model, then of the sim, before over after, with
// text scanners.
func Ratios(rs []Result) []string {
	var lines []string
	for _, target := range []experiment.Target{experiment.Model, experiment.Sim} {
		find := func(variant string) *Result {
			for i, r := range rs {
				if r.Target == target && r.Variant == variant && r.Scanners == "text" && !r.Insufficient() {
					return &rs[i]
				}
			}
			return nil
		}
		b, a := find(procfs.Before.String()), find(procfs.After.String())
		if b == nil || a == nil {
			continue
		}
		for _, m := range []struct {
			name   string
			before float64
			after  float64
		}{{"op_max_us", b.OpMaxUS, a.OpMaxUS}, {"op_max_median_us", b.OpMaxMedianUS, a.OpMaxMedianUS},
			{"lock_wait_max_us", *b.LockWaitMaxUS, *a.LockWaitMaxUS}} {
			if m.after > 0 {
				lines = append(lines, fmt.Sprintf("%s, text scanners: %s before/after = %.1fx", target, m.name, m.before/m.after))
			}
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
		return experiment.VerdictLine("insufficient: a run timed no call in " + strings.Join(none, ", ")), true
	}
	return "", false
}
