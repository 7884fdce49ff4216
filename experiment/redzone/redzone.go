// Package redzone is the red-zone experiment of seed 000's uprobes: a leaf
// function keeps words in the x86-64 red zone (below %rsp, where the System
// V ABI lets a leaf keep data without moving %rsp) across a probed 5-byte
// nop, and checks them at every call (cpu.RedZoneTarget). The v6.18 nop5
// optimization writes a call there, whose return address and the
// trampoline's pushes land in the red zone; the jmp-slot design proposed
// in May 2026 steps over it. Its model side runs the three designs of the
// optimization (uprobes.Optimize: off, call, jmp-slot) side by side; its
// live side (mmlab/live/redzone) runs the same bytes on the running kernel
// with a perf or a uprobe_multi uprobe on them.
package redzone

import (
	"flag"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strings"
	"text/tabwriter"
	"time"

	"mmlab/cpu"
	"mmlab/experiment"
	"mmlab/experiment/attach"
	"mmlab/report"
	"mmlab/uapi"
	"mmlab/uprobes"
)

// Options are the options of `mmlab run redzone`; their JSON is the
// document's params.
type Options struct {
	Calls   int      `json:"calls"`   // calls of the target per sample
	Samples int      `json:"samples"` // samples per design (after one warm-up sample)
	Attach  []string `json:"attach"`  // live: attach modes (package attach)

	// Set by the runs, not by flags: the clocks the samples were timed on,
	// and whether the live kernel optimizes uprobes on nop5.
	ModelClock       string `json:"model_clock,omitempty"`
	LiveClock        string `json:"live_clock,omitempty"`
	OptimizedUprobes *bool  `json:"optimized_uprobes,omitempty"`
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{Calls: 20000, Samples: 7, Attach: []string{uapi.AttachMulti, uapi.AttachPerf}}
}

// Flags registers the options on fs.
func (o *Options) Flags(fs *flag.FlagSet) {
	fs.IntVar(&o.Calls, "calls", o.Calls, "calls of the target per sample")
	fs.IntVar(&o.Samples, "samples", o.Samples, "samples per design, after a warm-up sample that counts only in the red-zone check")
	attach.ModesVar(fs, &o.Attach, "attach", "live: comma-separated attach modes, uprobe_multi and/or perf")
}

// Validate checks every option.
func (o *Options) Validate() error {
	if o.Calls < 1 {
		return fmt.Errorf("--calls %d: want at least 1", o.Calls)
	}
	if o.Samples < 2 {
		return fmt.Errorf("--samples %d: want at least 2 (the spread needs two)", o.Samples)
	}
	return nil
}

// Sites of a result: where the probe was.
const (
	SiteNop5 = "nop5" // the 5-byte nop (the model's every design)
	SiteNop  = "nop"  // live: the one-byte nop, an int3 at every hit
	SiteNone = "none" // live: no probe
)

// AttachModel is the attach of a model result.
const AttachModel = "model"

// Result is one (target, variant, attach, site) run. Its variant is the
// design (off, call, jmp-slot) on the model, VariantKernel live.
type Result struct {
	experiment.Row
	Attach string `json:"attach"` // AttachModel, or the live attach mode ("none" without a probe)
	Site   string `json:"site"`
	// Mops is the mean hit rate in million hits per CPU-second of the
	// calling thread over the samples (calls without a probe; the params
	// say which clock: "thread-cpu", or "wall" where the OS has none).
	Mops       float64   `json:"mops"`
	MopsStddev float64   `json:"mops_stddev"`
	MopsRuns   []float64 `json:"mops_runs"`
	// The red-zone check, over every call (the warm-up's too): Calls,
	// the calls that found a word changed, and the union of the changed
	// words (bit i: -8*(i+1)(%rsp)).
	Calls     uint64 `json:"calls"`
	Hits      uint64 `json:"hits"`
	Corrupted uint64 `json:"corrupted_calls"`
	Mask      uint64 `json:"mask"`
	// HitNs is what the probe adds to a call, ns: the time per call minus
	// that of the same calls without a probe (model: paired samples of a
	// kernel without the uprobe; live: the no-probe result's mean). The
	// model's target alone costs it as much as a hit, which the rates
	// blur and this does not.
	HitNs       float64 `json:"hit_ns" report:"signed"` // a difference: below 0 when noise outweighs the hit
	HitNsStddev float64 `json:"hit_ns_stddev"`
	// VsInt3 is the rate over the int3 baseline's: on the model the off
	// design's (paired samples, taken in turn); live the nop site's of
	// the same attach mode (ratio of the means, spread propagated).
	*VsInt3
}

// VsInt3 is a rate's ratio to its int3 baseline, and the ratio of the
// costs per hit (HitNs).
type VsInt3 struct {
	Ratio            float64 `json:"ratio_vs_int3"`
	RatioStddev      float64 `json:"ratio_vs_int3_stddev"`
	HitNsRatio       float64 `json:"hit_ns_ratio_vs_int3" report:"signed"` // of two differences
	HitNsRatioStddev float64 `json:"hit_ns_ratio_vs_int3_stddev"`
}

// NewResult summarises a run: rates are per second, one per sample.
func NewResult(row experiment.Row, attachMode, site string, rates []float64, calls, hits, corrupted, mask uint64) Result {
	r := Result{Row: row, Attach: attachMode, Site: site, Calls: calls, Hits: hits, Corrupted: corrupted, Mask: mask}
	for _, x := range rates {
		r.MopsRuns = append(r.MopsRuns, x*1e-6)
	}
	r.Mops, r.MopsStddev = report.MeanStddev(r.MopsRuns)
	return r
}

// RatioOfMeans is VsInt3 of two independent runs: the ratios of the
// means, their spreads propagated from both.
func RatioOfMeans(r, base Result) *VsInt3 {
	if base.Mops <= 0 || base.HitNs <= 0 {
		return nil
	}
	v := &VsInt3{Ratio: r.Mops / base.Mops, HitNsRatio: r.HitNs / base.HitNs}
	v.RatioStddev = v.Ratio * math.Hypot(r.MopsStddev/r.Mops, base.MopsStddev/base.Mops)
	v.HitNsRatioStddev = v.HitNsRatio * math.Hypot(r.HitNsStddev/r.HitNs, base.HitNsStddev/base.HitNs)
	return v
}

// SetHitNsRuns sets r's HitNs and its spread from hitNs, one cost per hit
// per sample.
func (r *Result) SetHitNsRuns(hitNs []float64) { r.HitNs, r.HitNsStddev = report.MeanStddev(hitNs) }

// PairedVsInt3 is VsInt3 of a design sampled in turn with off, from both
// designs' rates and costs per hit, sample by sample: the rates' ratio pair
// by pair; the costs' as the ratio of the means (a sample's cost is a
// difference, near 0 for a cheap design, so the pairs' ratios scatter).
func PairedVsInt3(rates, offRates, hitNs, offHitNs []float64) *VsInt3 {
	ns, nsSd := report.MeanStddev(hitNs)
	offNs, offSd := report.MeanStddev(offHitNs)
	v := &VsInt3{HitNsRatio: ns / offNs}
	v.HitNsRatioStddev = math.Abs(v.HitNsRatio) * math.Hypot(nsSd/ns, offSd/offNs)
	v.Ratio, v.RatioStddev = report.PairRatios(rates, offRates)
	return v
}

// SetHitNs sets r's HitNs from the mean rate of the same calls without a
// probe, the spread propagated from both rates.
func (r *Result) SetHitNs(none Result) {
	if r.Mops <= 0 || none.Mops <= 0 {
		return
	}
	r.HitNs = 1e3/r.Mops - 1e3/none.Mops
	r.HitNsStddev = math.Hypot(1e3*r.MopsStddev/(r.Mops*r.Mops), 1e3*none.MopsStddev/(none.Mops*none.Mops))
}

// Slots names the red-zone words of mask: "-8,-16,-24,-32(%rsp)", or
// "none".
func Slots(mask uint64) string {
	if mask == 0 {
		return "none"
	}
	var s []string
	for m := mask; m != 0; m &= m - 1 {
		s = append(s, fmt.Sprint(-8*(bits.TrailingZeros64(m)+1)))
	}
	return strings.Join(s, ",") + "(%rsp)"
}

// Design names a result's row: the model's design, or the live site.
func (r Result) Design() string {
	if r.Target.IsModel() {
		return r.Variant
	}
	switch r.Site {
	case SiteNop:
		return "kernel, probe on nop (int3)"
	case SiteNone:
		return "kernel, no probe"
	}
	return "kernel, probe on nop5"
}

// Table prints one line per result.
func Table(w io.Writer, o *Options, rs []Result) {
	fmt.Fprintf(w, "red zone: a leaf keeps %d words at -8..-%d(%%rsp) across a probed nop5; %d calls per sample, %d samples after a warm-up; rates per CPU-second of the calling thread\n",
		cpu.RedZoneSlots, 8*cpu.RedZoneSlots, o.Calls, o.Samples)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "target\tdesign\tattach\tM hits/s\tvs int3\tns/hit\tvs int3\tcalls\tcorrupted\tmask\twords\t")
	for _, r := range rs {
		ratio, nsRatio, ns := "-", "-", "-"
		if r.VsInt3 != nil {
			ratio = fmt.Sprintf("%.3f ± %.3f", r.Ratio, r.RatioStddev)
			nsRatio = fmt.Sprintf("%.2f ± %.2f", r.HitNsRatio, r.HitNsRatioStddev)
		}
		if r.HitNs != 0 {
			ns = fmt.Sprintf("%.0f ± %.0f", r.HitNs, r.HitNsStddev)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.3f ± %.3f\t%s\t%s\t%s\t%d\t%d\t%#x\t%s\t\n", r.Target, r.Design(), r.Attach,
			r.Mops, r.MopsStddev, ratio, ns, nsRatio, r.Calls, r.Corrupted, r.Mask, Slots(r.Mask))
	}
	tw.Flush()
	if len(rs) > 0 && rs[0].Target == experiment.Model {
		fmt.Fprintln(w, "model: the interpreter runs the trampoline's or slot's instructions and the uprobe syscall, while an int3 costs it one Go call: so its optimized designs are slower than int3, unlike a real CPU's")
	}
}

// Judge says what the live results show of the kernel: whether a uprobe on
// a nop5 corrupts the red zone, as a verdict line; found is false without
// a live nop5 result.
func Judge(rs []Result) (line string, corrupts, found bool) {
	var calls, bad, mask uint64
	var modes []string
	for _, r := range rs {
		if r.Target != experiment.Live || r.Site != SiteNop5 {
			continue
		}
		found = true
		calls, bad, mask = calls+r.Calls, bad+r.Corrupted, mask|r.Mask
		modes = append(modes, r.Attach)
	}
	switch {
	case !found:
		return "", false, false
	case bad > 0:
		return fmt.Sprintf("this kernel's nop5 optimization clobbers a probed function's red zone: %d of %d calls found %s changed (%s uprobes)",
			bad, calls, Slots(mask), strings.Join(modes, ", ")), true, true
	}
	return fmt.Sprintf("this kernel leaves a probed function's red zone alone: %d calls, none found a word changed (%s uprobes)",
		calls, strings.Join(modes, ", ")), false, true
}

// Verdict judges the live results and checks the model's: its off and
// jmp-slot designs must leave the red zone alone (a failed check otherwise).
func Verdict(_ *Options, rs []Result) (string, bool) {
	for _, r := range rs {
		if r.Target.IsModel() && r.Variant != uprobes.OptimizeCall.String() && r.Corrupted > 0 {
			return experiment.VerdictLine(fmt.Sprintf("model error: the %s design corrupted the red zone (%s)", r.Variant, Slots(r.Mask))), true
		}
	}
	line, _, _ := Judge(rs) // "" when no live result
	return experiment.VerdictLine(line), false
}

// Def is the red-zone experiment.
var Def = experiment.Def[*Options, Result]{
	Name:    "redzone",
	Seed:    "000",
	Summary: "whether an optimized uprobe on a nop5 corrupts the probed function's red zone (call vs the proposed jmp-slot)",
	Help: `usage: mmlab run redzone [--target model|live|both] [--variant off,call,jmp-slot] [--calls N] [--samples S] [--attach uprobe_multi,perf] [--json]

A leaf function stores 8 known words at -8..-64(%rsp), runs a nop and a probed
nop5, and reports which words changed (the red zone: the 128 bytes below %rsp
that the x86-64 ABI lets a leaf use without moving %rsp). Since v6.18 the
kernel turns a probed nop5 into a call to a trampoline: the call's return
address and the trampoline's three pushes land at -8..-32. The fix proposed
in May 2026 (linux-trace-kernel, "The x86 uprobe nop5 optimization currently
replaces a 5-byte NOP at the probe site with a CALL...") writes a jmp to a
16-byte slot that steps over the red zone first.
Model: the designs off (int3 at every hit), call (v6.18) and jmp-slot (the
proposal), RCU Tasks Trace hit path, sampled in turn; the hit rate of each
and its ratio to off. Live: the same bytes in this binary, with a perf or a
uprobe_multi uprobe on the nop5, on the nop (int3, never optimized) and
without a probe; ends with a verdict on this kernel. Live needs Linux and
root.
`,
	Variants:   uprobes.Optimizations.Names(),
	NewOptions: NewOptions,
	Settings: func() experiment.Settings {
		return experiment.Settings{
			Quick:    []string{"--calls", "5000", "--samples", "5"},
			Full:     []string{"--calls", "100000", "--samples", "10"},
			Smoke:    []string{"--calls", "200", "--samples", "5", "--attach", "uprobe_multi"},
			EstQuick: 5 * time.Second, EstFull: time.Minute,
		}
	},
	Model:   RunModel,
	Sim:     true,
	Table:   Table,
	Verdict: Verdict,
}
