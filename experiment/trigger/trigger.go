// Package trigger is seed 004's benchmark, the kernel's `bench trig-*`
// (tools/testing/selftests/bpf/benchs/bench_trigger.c): N producers, each on
// its own CPU, call a target function in a tight loop while a probe on it
// counts hits. Its model side runs the loop on model CPUs on the kernels of
// uprobes.Variants (the seed's era under both flavours, today's hit path),
// sampled in turn; its
// live side (mmlab/live/trigger) runs it on the running kernel.
package trigger

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"mmlab/experiment"
	"mmlab/experiment/attach"
	"mmlab/report"
	"mmlab/smp"
	"mmlab/uapi"
	"mmlab/uprobes"
)

// Case is one of the kernel's `bench trig-*` benchmarks: the function the
// producer loop calls and the probe on it.
type Case struct {
	Name string
	// Target is the function called: "nop" (nop; ret), "ret" (a lone ret)
	// or "nop5" (a 5-byte nop; ret), the bench's uprobe_target_*.
	Target string
	Probed bool // a probe on the target's first instruction
	Ret    bool // the probe is a uretprobe
}

// The targets.
const (
	TargetNop  = "nop"
	TargetRet  = "ret"
	TargetNop5 = "nop5"
)

// AllCases are the cases, in table order.
var AllCases = []Case{
	{"nop", TargetNop, false, false},         // no probe: the loop's own speed, calls/s
	{"uprobe-nop", TargetNop, true, false},   // uprobe on a nop (emulated)
	{"uretprobe-nop", TargetNop, true, true}, // uretprobe on the nop function
	{"uprobe-ret", TargetRet, true, false},   // uprobe on a ret (single-stepped out of line)
	{"uprobe-nop5", TargetNop5, true, false}, // uprobe on a 5-byte nop (x86 may optimize it)
}

// DefaultCases are the cases run unless --cases says otherwise.
var DefaultCases = []string{"nop", "uprobe-nop", "uretprobe-nop", "uprobe-ret"}

// LookupCase returns the case named name.
func LookupCase(name string) (Case, bool) {
	i := slices.IndexFunc(AllCases, func(c Case) bool { return c.Name == name })
	if i < 0 {
		return Case{}, false
	}
	return AllCases[i], true
}

func caseNames() []string {
	var ns []string
	for _, c := range AllCases {
		ns = append(ns, c.Name)
	}
	return ns
}

// MaxProducers bounds --cpus: the most CPUs a simulated machine has
// (sched.MaxSimCPUs); seed 004's machine has 80.
const MaxProducers = 128

// Options are the options of `mmlab run trigger`; their JSON is the
// document's params.
type Options struct {
	CPUs   []int    `json:"cpus"`   // producer counts
	Cases  []string `json:"cases"`  // case names
	Attach []string `json:"attach"` // live: attach modes (package attach)
	// Optimize are the model's nop5 optimizations (uprobes.Optimize
	// names, or OptimizeKernel): each gives every variant a kernel of its
	// own.
	Optimize []string `json:"optimize"`
	// Warmup runs before the first sample; then one sample per Interval
	// until Duration is covered.
	Warmup   experiment.Duration `json:"warmup_ms"`
	Duration experiment.Duration `json:"duration_ms"`
	Interval experiment.Duration `json:"interval_ms"`
	// C2C takes, on the sim target, each kernel's contention profile
	// (smp.C2C) into its result and prints it after the table.
	C2C bool `json:"c2c,omitempty"`
	// C2CAt, if set, limits the profile to these producer counts.
	C2CAt []int `json:"c2c_at,omitempty"`

	// LoadavgEnd is set by the run, not by a flag: the one-minute load
	// average at its end (NoteLoad).
	LoadavgEnd float64 `json:"loadavg_end,omitempty"`
}

// OptimizeKernel, as an --optimize value, keeps each variant's own: none in
// the seed's era (v6.12), a call to the trampoline in v6.14+ (x86-64 since
// v6.18).
const OptimizeKernel = "kernel"

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{CPUs: []int{1, 2}, Cases: slices.Clone(DefaultCases), Attach: []string{uapi.AttachMulti, uapi.AttachPerf},
		Optimize: []string{OptimizeKernel}, Warmup: experiment.Duration(time.Second), Duration: experiment.Duration(5 * time.Second), Interval: experiment.Duration(time.Second)}
}

// Flags registers the options on fs.
func (o *Options) Flags(fs *flag.FlagSet) {
	experiment.CountsVar(fs, &o.CPUs, "cpus", fmt.Sprintf("comma-separated producer counts, 1 to %d; producer i pinned to CPU i", MaxProducers), 1, MaxProducers)
	experiment.NamesVar(fs, &o.Cases, "cases", "comma-separated cases of "+strings.Join(caseNames(), ","), caseNames()...)
	attach.ModesVar(fs, &o.Attach, "attach", "live: comma-separated attach modes, uprobe_multi and/or perf")
	opts := []string{OptimizeKernel}
	for _, opt := range uprobes.Optimizations.Values() {
		opts = append(opts, opt.String())
	}
	experiment.NamesVar(fs, &o.Optimize, "optimize", "model: comma-separated nop5 optimizations, kernel (each variant's own: off in v6.12, call in v6.14+), call (x86-64 since 6.18), off (an int3 at every hit) and/or jmp-slot; each a kernel of every variant, sampled in turn", opts...)
	experiment.Var(fs, &o.Warmup, "warmup", "warm-up before the first sample")
	experiment.Var(fs, &o.Duration, "duration", "measured time after warm-up: one sample per interval")
	experiment.Var(fs, &o.Interval, "interval", "sample length")
	fs.BoolVar(&o.C2C, "c2c", false, "sim only: each kernel's contention profile (the cache lines that moved between CPUs, as perf c2c reports them) after the table and in the JSON")
	experiment.CountsVar(fs, &o.C2CAt, "c2c-at", "with --c2c: the producer counts to profile (default every --cpus count)", 1, MaxProducers)
}

// profiled reports whether the run at n producers takes a contention
// profile.
func (o *Options) profiled(n int) bool {
	return o.C2C && (len(o.C2CAt) == 0 || slices.Contains(o.C2CAt, n))
}

// ValidateTargets refuses --c2c on a target other than sim: only a
// simulated machine has cache lines to profile.
func (o *Options) ValidateTargets(targets []experiment.Target) error {
	for _, t := range targets {
		if o.C2C && t != experiment.Sim {
			return fmt.Errorf("--c2c: the contention profile is of simulated machines only: want --target sim, got %s among the targets", t)
		}
	}
	if len(o.C2CAt) > 0 && !o.C2C {
		return fmt.Errorf("--c2c-at %v: profiles are taken with --c2c only", o.C2CAt)
	}
	return nil
}

// Validate checks every option.
func (o *Options) Validate() error {
	switch {
	case o.Warmup < 0:
		return fmt.Errorf("--warmup %v: want 0 or more", o.Warmup)
	case o.Interval <= 0:
		return fmt.Errorf("--interval %v: want more than 0", o.Interval)
	case o.Duration < o.Interval:
		return fmt.Errorf("--duration %v: want at least one --interval (%v)", o.Duration, o.Interval)
	}
	return nil
}

// Samples is the number of samples a run takes.
func (o *Options) Samples() int { return max(1, int(o.Duration/o.Interval)) }

// The attach of a result that is not a live attach mode.
const (
	AttachModel = "model" // a model result
	AttachNone  = "none"  // a live case without a probe
)

// Result is one (target, variant, attach, case, cpus) measurement.
type Result struct {
	experiment.Row
	// Attach is AttachModel for the model; live, AttachNone or the attach
	// mode (package attach).
	Attach string `json:"attach"`
	Case   string `json:"case"`
	CPUs   int    `json:"cpus"`
	// Optimize is the model kernel's nop5 optimization (empty live).
	Optimize string `json:"optimize,omitempty"`
	// Mops is the mean rate over the samples in million hits per second
	// (calls per second for the case without a probe).
	Mops       float64   `json:"mops"`
	MopsStddev float64   `json:"mops_stddev"`
	MopsRuns   []float64 `json:"mops_runs"`
	Calls      uint64    `json:"calls"` // calls of the target in the samples
	Hits       uint64    `json:"hits"`  // probe runs in the samples
	*PerCPU
	*VsSRCU
	*CPUVsSRCU
	// C2C is the sim kernel's contention profile with --c2c.
	C2C *C2C `json:"c2c,omitempty"`
}

// C2C is the contention profile of one sim kernel's run (its warm-up and
// samples): the cache lines that moved between its CPUs.
type C2C struct {
	// Ops are the run's hits (calls for the case without a probe), what
	// a line's transfers are counted per in the table.
	Ops     uint64       `json:"ops"`
	Profile *smp.Profile `json:"profile"`
}

// PerCPU is the model's rate per producer CPU-second times the producers:
// what producers with a host core each would do.
type PerCPU struct {
	MopsCPU       float64   `json:"mops_cpu"`
	MopsCPUStddev float64   `json:"mops_cpu_stddev"`
	MopsCPURuns   []float64 `json:"mops_cpu_runs"`
}

// VsSRCU is a model flavour's rate over SRCU's, sample pair by sample pair
// (the flavours are sampled in turn).
type VsSRCU struct {
	RatioVsSRCU       float64 `json:"ratio_vs_srcu"`
	RatioVsSRCUStddev float64 `json:"ratio_vs_srcu_stddev"`
}

// CPUVsSRCU is VsSRCU per CPU-second.
type CPUVsSRCU struct {
	RatioCPUVsSRCU       float64 `json:"ratio_cpu_vs_srcu"`
	RatioCPUVsSRCUStddev float64 `json:"ratio_cpu_vs_srcu_stddev"`
}

// NewResult summarises samples (rates per second, one per interval).
func NewResult(row experiment.Row, attachMode, c string, cpus int, samples []float64, calls, hits uint64) Result {
	mops := scale(samples, 1e-6)
	r := Result{Row: row, Attach: attachMode, Case: c, CPUs: cpus, MopsRuns: mops, Calls: calls, Hits: hits}
	r.Mops, r.MopsStddev = report.MeanStddev(mops)
	return r
}

func scale(xs []float64, k float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x * k
	}
	return out
}

// FormatLine prints one summary line exactly as the kernel's trigger
// benchmark sweep does (seed 004), from a rate and its spread in M/s:
//
//	uprobe-nop ( 1 cpus): 3.396 ± 0.002M/s ( 3.396M/s/cpu)
func FormatLine(c string, cpus int, mops, sd float64) string {
	return fmt.Sprintf("%s (%2d cpus): %.3f ± %.3fM/s (%6.3fM/s/cpu)", c, cpus, mops, sd, mops/float64(cpus))
}

// Table prints the results in the seed's format: the model's per CPU-second
// rates and ratios, case by case, then a header and the seed's lines for
// each run of results with the same target, variant and attach.
func Table(w io.Writer, o *Options, rs []Result) {
	var model []Result
	onHost, sim := false, false
	for _, r := range rs {
		if r.Target.IsModel() {
			model = append(model, r)
		}
		onHost = onHost || r.Target != experiment.Sim
		sim = sim || r.Target == experiment.Sim
	}
	if n, cpus := slices.Max(append([]int{0}, o.CPUs...)), runtime.NumCPU(); n > cpus && onHost {
		fmt.Fprintf(w, "warning: up to %d producers on %d CPUs: producers share CPUs, so \"( N cpus)\" counts producers, not CPUs\n", n, cpus)
	}
	if len(model) > 0 && onHost {
		fmt.Fprintln(w, "model: the flavours alternate sample by sample; per CPU-second = hits per producer CPU-second x CPUs (what producers with a core each would do)")
	}
	if sim {
		fmt.Fprintln(w, "sim: each flavour's samples in a run of its own simulated machine, in virtual time; per CPU-second as for the model")
	}
	for _, c := range o.Cases {
		for _, n := range o.CPUs {
			for _, r := range model {
				if r.Case != c || r.CPUs != n {
					continue
				}
				if r.PerCPU != nil {
					fmt.Fprintf(w, "  %-11s per CPU-second: %s\n", rowName(o, r), FormatLine(c, n, r.MopsCPU, r.MopsCPUStddev))
				}
				if r.VsSRCU != nil {
					line := fmt.Sprintf("  %s/srcu ratio: wall %.3f ± %.3f", rowName(o, r), r.RatioVsSRCU, r.RatioVsSRCUStddev)
					if r.CPUVsSRCU != nil {
						line += fmt.Sprintf(", per CPU-second %.3f ± %.3f", r.RatioCPUVsSRCU, r.RatioCPUVsSRCUStddev)
					}
					fmt.Fprintln(w, line)
				}
			}
		}
	}
	var last string
	for _, r := range rs {
		if key := fmt.Sprint(r.Target, r.Variant, r.Attach, r.Optimize); key != last {
			switch {
			case r.Target == experiment.Live && r.Attach == AttachNone:
				fmt.Fprintf(w, "live kernel (%s), no probe: calls of the target\n", report.ThisMachine().Kernel)
			case r.Target == experiment.Live:
				fmt.Fprintf(w, "live kernel, BPF counter on a %s link: hits, each call checked counted\n", r.Attach)
			default:
				fmt.Fprintf(w, "%s %s:\n", r.Target, modelName(o, r))
			}
			last = key
		}
		fmt.Fprintln(w, FormatLine(r.Case, r.CPUs, r.Mops, r.MopsStddev))
	}
	for _, r := range rs {
		if r.C2C != nil {
			formatC2C(w, o, r)
		}
	}
}

// formatC2C prints r's contention profile headed by its kernel, with each
// line's transfers per hit (per call without a probe) of the run.
func formatC2C(w io.Writer, o *Options, r Result) {
	per := "hit"
	if c, _ := LookupCase(r.Case); !c.Probed {
		per = "call"
	}
	c := r.C2C
	fmt.Fprintf(w, "\n%s %s, %s (%d cpus): contention profile of the run (warm-up and samples), %d %ss\n", r.Target, modelName(o, r), r.Case, r.CPUs, c.Ops, per)
	if c.Profile == nil {
		return
	}
	if c.Ops > 0 {
		fmt.Fprintln(w, C2CSummary(r))
	}
	c.Profile.Format(w)
}

// C2CSummary is the line of r's contention profile: the cache-line
// transfers per hit (per call without a probe), in all and per line.
func C2CSummary(r Result) string {
	per := "hit"
	if c, _ := LookupCase(r.Case); !c.Probed {
		per = "call"
	}
	c := r.C2C
	if c == nil || c.Profile == nil || c.Ops == 0 {
		return "no profile"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "transfers per %s: %.3f", per, float64(c.Profile.Transfers)/float64(c.Ops))
	for _, l := range c.Profile.Lines {
		fmt.Fprintf(&b, ", %s %.3f", l.Name, float64(l.Transfers)/float64(c.Ops))
	}
	return b.String()
}

// rowName is modelName, after "sim" for a sim result.
func rowName(o *Options, r Result) string {
	if r.Target == experiment.Sim {
		return "sim " + modelName(o, r)
	}
	return modelName(o, r)
}

// modelName is a model result's variant, with its nop5 optimization
// unless every variant runs its kernel's own.
func modelName(o *Options, r Result) string {
	if r.Optimize == "" || slices.Equal(o.Optimize, []string{OptimizeKernel}) {
		return r.Variant
	}
	return fmt.Sprintf("%s (nop5 optimization %s)", r.Variant, r.Optimize)
}

// NoteLoad records the one-minute load average at the end of a run in the
// params, and warns when it exceeds the CPUs: other tasks then shared the
// producers' CPUs.
func NoteLoad(o *Options, env experiment.Env) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return
	}
	var l float64
	if _, err := fmt.Sscan(string(b), &l); err != nil {
		return
	}
	o.LoadavgEnd = l
	if cpus := runtime.NumCPU(); l > float64(cpus) {
		env.Progress("warning: load average %.1f on %d CPUs at the end: other tasks shared the producers' CPUs", l, cpus)
	}
}

// cpuList is every producer count from 1 to the host's CPUs, the full
// setting's sweep.
func cpuList() string {
	n := min(max(1, runtime.NumCPU()), MaxProducers)
	var l []string
	for i := 1; i <= n; i++ {
		l = append(l, strconv.Itoa(i))
	}
	return strings.Join(l, ",")
}

// SeedMachine is seed 004's machine: its sweep's 80-CPU Xeon Gold 6138.
const SeedMachine = "xeon-gold-6138-2s"

// SeedCPUs are the producer counts of seed 004's sweep, and the machine's
// 80 CPUs.
var SeedCPUs = []int{1, 2, 4, 8, 16, 32, 64, 80}

// simSettings is seed 004's sweep on its machine: both of the seed's cases
// and the extra rows (uprobe-ret, uprobe-nop5) on every variant, one point
// per producer count, the contention profile at 8 producers (the seed's
// peak). Samples of 10 ms of virtual time stand for the seed's 1 s ones (a
// choice of the simulation): up to 16 CPUs a run's samples agree to 0.1%.
// From 32 CPUs, where mmap_lock's lines cross the sockets, a sample
// measures one order of the producers' convoy on them: the seed's ties
// set it when the producers start, all at one instant, and nothing in the
// model reorders it before the sample ends, so the sample's rate is that
// order's, by how often the lines cross the sockets on their way round
// (srcu and tasks-trace: 20-35% between a run's samples). A point's mean
// is then over 5 orders, and moves 2-12% with the seed; 20 samples
// (--duration 200ms) halve that, and 2% would take some 150, which the
// sweep's time does not allow. The seed's own ± at 16 and 32 CPUs is
// smaller: a real machine reorders the convoy all the time.
func simSettings() *experiment.SimSettings {
	timing := func(warmup, duration, interval string) []string {
		return []string{"--warmup", warmup, "--duration", duration, "--interval", interval}
	}
	cpus := func(ns []int) string {
		l := make([]string, len(ns))
		for i, n := range ns {
			l[i] = strconv.Itoa(n)
		}
		return strings.Join(l, ",")
	}
	cases := "uprobe-nop,uretprobe-nop,uprobe-ret,uprobe-nop5"
	full := append([]string{"--cases", cases, "--c2c", "--c2c-at", "8"}, timing("5ms", "50ms", "10ms")...)
	s := &experiment.SimSettings{
		Machine:  SeedMachine,
		Quick:    append([]string{"--cpus", cpus(SeedCPUs[:7]), "--cases", "uprobe-nop,uretprobe-nop", "--variant", "srcu,tasks-trace"}, timing("2ms", "10ms", "2ms")...),
		Full:     append([]string{"--cpus", cpus(SeedCPUs)}, full...),
		Smoke:    append([]string{"--cpus", "1,2", "--cases", "uprobe-nop"}, timing("0s", "1ms", "500us")...),
		EstQuick: 40 * time.Second, EstFull: 10 * time.Minute,
	}
	for _, n := range SeedCPUs {
		s.Points = append(s.Points, append([]string{"--cpus", strconv.Itoa(n)}, full...))
	}
	return s
}

// Def is the trigger experiment.
var Def = experiment.Def[*Options, Result]{
	Name:    "trigger",
	Seed:    "004",
	Summary: "uprobe hits per second on 1..N CPUs (the kernel's bench trig-*)",
	Help: `usage: mmlab run trigger [--target model|live|both] [--variant srcu,tasks-trace,v6.14+] [--attach uprobe_multi,perf] [--optimize call,off] [--cases ...] [--cpus 1,2] [--duration D] [--c2c] [--json]

N producers, each pinned to its own CPU, call a target function in a tight
loop; a probe on it counts hits. Cases: nop (no probe: the loop's own speed),
uprobe-nop (uprobe on a nop), uretprobe-nop, uprobe-ret (uprobe on a ret),
uprobe-nop5 (on a 5-byte nop; optional). After the warm-up, one sample per
interval; printed as the kernel's trigger sweep prints (seed 004):

  uprobe-nop ( 1 cpus): 3.396 ± 0.002M/s ( 3.396M/s/cpu)

Model: the variants are kernels, sampled in turn on model CPUs: srcu and
tasks-trace are the seed's era (v6.12's hit path: the mmap read lock on
every hit, a uprobe reference per return instance) under each protection,
v6.14+ is today's (lockless VMA lookup, leased and pooled return
instances) under Tasks Trace. A uprobe on a 5-byte nop stays an int3 in
the seed's era and becomes a call to a trampoline in v6.14+ (x86-64 since
6.18): --optimize kernel, the default. --optimize call,off gives every
variant a kernel that optimizes it and one that leaves it an int3, sampled
in turn: what the optimization buys on uprobe-nop5 (jmp-slot is the
proposed design of the redzone experiment).
Sim: --c2c adds each kernel's contention profile (the cache lines that
moved between its CPUs, as perf c2c reports them) after the table, with
each line's transfers per hit, and to the JSON; another target refuses it.
Live: the targets are Go-assembly leaves in this binary, the counter a BPF
program on a uprobe_multi link or a perf-event uprobe; every call must be
counted. Live needs Linux and root.
`,
	Variants:   uprobes.VariantNames(),
	NewOptions: NewOptions,
	Settings: func() experiment.Settings {
		return experiment.Settings{
			Quick:    []string{"--cpus", "1,2", "--cases", "nop,uprobe-nop,uretprobe-nop", "--warmup", "200ms", "--duration", "1s", "--interval", "250ms"},
			Full:     []string{"--cpus", cpuList(), "--warmup", "1s", "--duration", "5s", "--interval", "1s"},
			Smoke:    []string{"--cpus", "1,2", "--cases", "uprobe-nop", "--warmup", "0s", "--duration", "100ms", "--interval", "50ms"},
			EstQuick: 20 * time.Second, EstFull: 10 * time.Minute,
			Sim: simSettings(),
		}
	},
	Model: RunModel,
	Sim:   true,
	Table: Table,
}
