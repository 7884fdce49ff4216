// Package refscale is the kernel's refscale module (kernel/rcu/refscale.c)
// on the model's read-side primitives: N readers, reader i a thread on model
// CPU i, each run N read-side critical sections in a loop, and the figure is
// nanoseconds per reader operation as main_func() computes it:
// result_avg[exp] = 1000 * process_durations(nreaders) / (nreaders * loops),
// printed in thousandths, so the sum of the readers' timed durations over
// readers × loops. Each reader's timed section is refscale's readsection(loops),
// whose `for (i = nloops; i >= 0; i--)` runs loops+1 critical sections; the
// divisor is loops, as the kernel's.
//
// This package is the definition (Def: options, the typed result, the table
// and the verdict) and the model runner (model.go); the live runner is
// mmlab/live/refscale.
package refscale

import (
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"mmlab/experiment"
	"mmlab/report"
)

// The scale types: refscale's scale_type names, and one of the model's own.
const (
	TypeRefcnt      = "refcnt"       // ref_refcnt_section(): atomic_inc() and atomic_dec() of one atomic_t
	TypeRWSem       = "rwsem"        // ref_rwsem_section(): down_read() and up_read()
	TypePercpuRWSem = "percpu-rwsem" // not a refscale type: percpu_down_read() and percpu_up_read()
	TypeSRCU        = "srcu"         // srcu_ref_scale_read_section(): srcu_read_lock() and srcu_read_unlock()
	TypeRCUTrace    = "rcu-trace"    // rcu_trace_ref_scale_read_section(): rcu_read_lock_trace() and rcu_read_unlock_trace()
	TypeRCU         = "rcu"          // ref_rcu_read_section(): rcu_read_lock() and rcu_read_unlock()
)

// Types are the scale types, in table order: the shared words first, the
// per-CPU and per-task ones after.
var Types = []string{TypeRefcnt, TypeRWSem, TypePercpuRWSem, TypeSRCU, TypeRCUTrace, TypeRCU}

// MaxReaders bounds --readers.
const MaxReaders = 64

// VariantModel is the variant of every model result: the model has one
// version of each primitive.
const VariantModel = "model"

// Def is the experiment's definition.
var Def = experiment.Def[*Options, Result]{
	Name:     "refscale",
	Summary:  "the kernel's refscale on the model's read-side primitives: ns per reader operation at N readers",
	Help:     help,
	Variants: []string{VariantModel},
	NewOptions: func() *Options {
		return &Options{Types: append([]string(nil), Types...), Readers: []int{1, 2, 4}, Loops: 10000, Runs: 5}
	},
	Settings: func() experiment.Settings {
		return experiment.Settings{
			Quick: []string{"--readers", "1,2,4", "--loops", "10000", "--runs", "5"},
			Full:  []string{"--readers", "1,2,4,8", "--loops", "10000", "--runs", "30"},
			Smoke: []string{"--readers", "1,2", "--loops", "100", "--runs", "2"},
			// Real time: a few ms a point; sim: some 100k accesses a point.
			EstQuick: 10 * time.Second, EstFull: time.Minute,
		}
	},
	Model:   RunModel,
	Sim:     true,
	Table:   Table,
	Verdict: Verdict,
}

const help = `usage: mmlab run refscale [--target model|sim|live] [--types LIST] [--readers N,...]
                           [--loops N] [--runs N] [--machine NAME] [--json] [--out DIR]

The kernel's refscale module (kernel/rcu/refscale.c) on the model's
read-side primitives. For each scale type and reader count N, N readers, one
thread on each of model CPUs 0..N-1, start together, warm up with one
read section loop, then time one loop of loops+1 empty read-side critical
sections each, and keep looping until every reader has finished its timed
loop (refscale's cool-down). A run's figure is the sum of the readers' timed
durations over N x loops, in nanoseconds (main_func()'s result_avg); each
point reports its mean and standard deviation over --runs runs (refscale's
nruns). Types: refcnt (atomic_inc/atomic_dec of one shared atomic_t), rwsem
(down_read/up_read), percpu-rwsem (percpu_down_read/percpu_up_read; no
refscale type), srcu (srcu_read_lock/srcu_read_unlock), rcu-trace
(rcu_read_lock_trace/rcu_read_unlock_trace), rcu (rcu_read_lock/
rcu_read_unlock on a non-preemptible kernel: nothing).

--target model runs in real time on this host's cores (readers beyond its
CPUs share them, and their figures take in the host's time slices);
--target sim on a
simulated machine (--machine), where the figures are virtual time with the
cache-line costs of package smp, the same for the same machine and seed.
--target live needs the kernel's refscale module loaded (/sys/module/
refscale), which mmlab never loads: without it the target is skipped.
`

// Options are the experiment's flags; their JSON is the document's params.
type Options struct {
	Types   []string `json:"types"`   // scale types
	Readers []int    `json:"readers"` // reader counts (refscale's nreaders)
	Loops   int      `json:"loops"`   // refscale's loops
	Runs    int      `json:"runs"`    // refscale's nruns
}

// Flags registers the options on fs.
func (o *Options) Flags(fs *flag.FlagSet) {
	experiment.NamesVar(fs, &o.Types, "types", "comma-separated scale types of "+strings.Join(Types, ","), Types...)
	experiment.CountsVar(fs, &o.Readers, "readers", fmt.Sprintf("comma-separated reader counts, 1 to %d; reader i on model CPU i", MaxReaders), 1, MaxReaders)
	fs.IntVar(&o.Loops, "loops", o.Loops, "read-side critical sections per reader per run (refscale's loops)")
	fs.IntVar(&o.Runs, "runs", o.Runs, "runs per point (refscale's nruns)")
}

// Validate checks every option.
func (o *Options) Validate() error {
	switch {
	case o.Loops < 1 || o.Loops > 100_000_000:
		return fmt.Errorf("--loops %d: want 1 to 100000000", o.Loops)
	case o.Runs < 1 || o.Runs > 1000:
		return fmt.Errorf("--runs %d: want 1 to 1000", o.Runs)
	case len(o.Types) == 0:
		return fmt.Errorf("--types is empty: want a comma-separated list of %s", strings.Join(Types, ", "))
	case len(o.Readers) == 0:
		return fmt.Errorf("--readers is empty: want a comma-separated list of counts from 1 to %d", MaxReaders)
	}
	return nil
}

// Result is one (type, readers, target) point.
type Result struct {
	experiment.Row
	Type    string `json:"type"`
	Readers int    `json:"readers"`
	Loops   int    `json:"loops"`
	// NsPerOp is the mean over the runs of refscale's figure: the readers'
	// timed durations summed, over readers × loops; NsPerOpStddev its
	// standard deviation, NsRuns each run's.
	NsPerOp       float64   `json:"ns_per_op"`
	NsPerOpStddev float64   `json:"ns_per_op_stddev"`
	NsRuns        []float64 `json:"ns_runs"`
	// Machine is the simulated machine's name (sim results only).
	Machine string `json:"machine,omitempty"`
	// HotLine is, in a sim result, the cache line that moved between CPUs
	// most (smp.C2C, over the whole point: warm-up and cool-down too), the
	// check-in counters left out, and
	// HotLinePerAccess its transfers per access; "" where none moved.
	HotLine          string  `json:"hot_line,omitempty"`
	HotLinePerAccess float64 `json:"hot_line_transfers_per_access,omitempty"`
}

// NewResult summarises the runs' figures.
func NewResult(row experiment.Row, typ string, readers, loops int, runs []float64) Result {
	r := Result{Row: row, Type: typ, Readers: readers, Loops: loops, NsRuns: runs}
	r.NsPerOp, r.NsPerOpStddev = report.MeanStddev(runs)
	if len(runs) < 2 {
		r.NsPerOpStddev = 0 // JSON has no NaN
	}
	return r
}

// Table prints one row per point, in the order run.
func Table(w io.Writer, _ *Options, rs []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "type\ttarget\treaders\tloops\tns/op\t±\truns\thot line\ttransfers/access\t")
	for _, r := range rs {
		target := r.Target.Label(r.Machine)
		hot, per := "-", "-"
		if r.HotLine != "" {
			hot, per = r.HotLine, fmt.Sprintf("%.3f", r.HotLinePerAccess)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.3f\t%.3f\t%d\t%s\t%s\t\n", r.Type, target, r.Readers, r.Loops, r.NsPerOp, r.NsPerOpStddev, len(r.NsRuns), hot, per)
	}
	tw.Flush()
}

// Verdict says, per target and type, how the figure grows from the fewest
// readers to the most: a shared line's cost grows with its readers, a
// per-CPU or per-task one's does not. It judges nothing: no figure fails.
func Verdict(_ *Options, rs []Result) (string, bool) {
	if len(rs) == 0 {
		return experiment.VerdictLine("no results"), true
	}
	type key struct {
		target experiment.Target
		typ    string
	}
	first, last := map[key]Result{}, map[key]Result{}
	var order []key
	for _, r := range rs {
		k := key{r.Target, r.Type}
		f, ok := first[k]
		if !ok {
			order = append(order, k)
			first[k], last[k] = r, r
			continue
		}
		if r.Readers < f.Readers {
			first[k] = r
		}
		if r.Readers > last[k].Readers {
			last[k] = r
		}
	}
	var parts []string
	for _, k := range order {
		f, l := first[k], last[k]
		if f.Readers == l.Readers {
			continue
		}
		ratio := l.NsPerOp / f.NsPerOp
		if f.NsPerOp == 0 || math.IsNaN(ratio) {
			parts = append(parts, fmt.Sprintf("%s %s %d→%d readers %.3f→%.3f ns", k.target, k.typ, f.Readers, l.Readers, f.NsPerOp, l.NsPerOp))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s %d→%d readers %.2fx", k.target, k.typ, f.Readers, l.Readers, ratio))
	}
	if len(parts) == 0 {
		return "", false
	}
	return experiment.VerdictLine("ns/op from fewest to most readers: " + strings.Join(parts, ", ")), false
}
