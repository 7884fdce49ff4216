package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"mmlab/live/uprobe"
	"mmlab/report"
)

// triggerFlags is what `mmlab run trigger` was asked for. The model target
// reads the same options.
type triggerFlags struct {
	target   string   // model, live or both
	variants []string // model: srcu, tasks-trace
	attach   []string // live: uprobe_multi, perf
	cpus     []int
	cases    []string
	warmup   time.Duration
	duration time.Duration // one sample per interval over this
	interval time.Duration
	json     bool
}

func init() {
	registerExperiment(&command{
		name:    "trigger",
		summary: "seed 004: uprobe hits per second on 1..N CPUs (the kernel's bench trig-*)",
		run:     runTrigger,
		quick: func(ctx context.Context) int {
			return runTrigger(ctx, []string{"--cpus", "1,2", "--warmup", "200ms", "--duration", "500ms", "--interval", "250ms"})
		},
		order: 30,
	})
}

func parseTrigger(args []string) (triggerFlags, error) {
	var f triggerFlags
	fs := flag.NewFlagSet("trigger", flag.ContinueOnError)
	fs.StringVar(&f.target, "target", "both", "model, live, or both")
	variant := fs.String("variant", "", "model protection: srcu or tasks-trace (default: both)")
	attach := fs.String("attach", "uprobe_multi,perf", "live: comma-separated attach modes, uprobe_multi and/or perf")
	cpus := fs.String("cpus", "1,2", "comma-separated producer counts, producer i pinned to CPU i")
	cases := fs.String("cases", strings.Join(uprobe.Cases, ","), "comma-separated cases of "+strings.Join(uprobe.AllCases, ","))
	fs.DurationVar(&f.warmup, "warmup", time.Second, "warm-up before the first sample")
	fs.DurationVar(&f.duration, "duration", 5*time.Second, "measured time after warm-up: one sample per interval")
	fs.DurationVar(&f.interval, "interval", time.Second, "sample length")
	fs.BoolVar(&f.json, "json", false, "print one JSON document in the common schema instead of the table")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: mmlab run trigger [--target model|live|both] [--variant srcu|tasks-trace] [--attach uprobe_multi|perf] [--cpus 1,2] [--duration D] [--json]

N producers, each pinned to its own CPU, call a target function in a tight
loop; a probe on it counts hits. Cases: nop (no probe: the loop's own speed),
uprobe-nop (uprobe on a nop), uretprobe-nop, uprobe-ret (uprobe on a ret),
uprobe-nop5 (on a 5-byte nop; optional). After the warm-up, one sample per
interval; printed as the kernel's trigger sweep prints (seed 004):

  uprobe-nop ( 1 cpus): 3.396 ± 0.002M/s ( 3.396M/s/cpu)

Live: the targets are Go-assembly leaves in this binary, the counter a BPF
program on a uprobe_multi link or a perf-event uprobe; every call must be
counted. Live needs Linux and root.

`)
		fs.PrintDefaults()
	}
	if err := parseArgs(fs, args); err != nil {
		return f, err
	}
	if err := checkTarget(f.target, *variant, "srcu", "tasks-trace"); err != nil {
		return f, err
	}
	f.variants = []string{"srcu", "tasks-trace"}
	if *variant != "" {
		f.variants = []string{*variant}
	}
	for _, a := range strings.Split(*attach, ",") {
		m, err := uprobe.ParseMode(a)
		if err != nil {
			return f, fmt.Errorf("--attach: %w", err)
		}
		f.attach = append(f.attach, m.String())
	}
	for _, s := range strings.Split(*cpus, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return f, fmt.Errorf("--cpus: bad count %q", s)
		}
		f.cpus = append(f.cpus, n)
	}
	for _, c := range strings.Split(*cases, ",") {
		if !slices.Contains(uprobe.AllCases, c) {
			return f, fmt.Errorf("--cases: unknown case %q (want %s)", c, strings.Join(uprobe.AllCases, ","))
		}
		f.cases = append(f.cases, c)
	}
	if f.interval <= 0 || f.duration < f.interval || f.warmup < 0 {
		return f, errors.New("--duration must be at least one --interval, and both positive")
	}
	return f, nil
}

func runTrigger(ctx context.Context, args []string) int {
	f, err := parseTrigger(args)
	if err == flag.ErrHelp {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mmlab run trigger: %v\n", err)
		return 2
	}
	doc := report.New("trigger", map[string]any{
		"cpus": f.cpus, "cases": f.cases, "warmup_ms": f.warmup.Milliseconds(),
		"duration_ms": f.duration.Milliseconds(), "interval_ms": f.interval.Milliseconds(),
	})
	out := io.Writer(os.Stdout)
	if f.json {
		out = io.Discard
	}
	status := 0
	if f.target != "live" {
		n := len(doc.Results)
		err := runModelTrigger(ctx, f, doc)
		printTrigger(out, doc.Results[n:])
		if err != nil {
			fmt.Fprintf(os.Stderr, "mmlab run trigger: model: %v\n", err)
			status = 1
		}
	}
	if f.target != "model" && ctx.Err() == nil {
		if err := uprobe.Supported(); err != nil {
			fmt.Fprintf(os.Stderr, "mmlab run trigger: live skipped: %v\n", err)
		} else if err := liveTrigger(ctx, f, doc, out); err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "mmlab run trigger: live: %v\n", err)
			status = 1
		}
	}
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "mmlab run trigger: interrupted; every probe it attached is detached")
		return 130
	}
	if load, ok := loadAvg(); ok {
		doc.Params["loadavg_end"] = load
		if cpus := doc.Machine.CPUs; load > float64(cpus) {
			fmt.Fprintf(out, "warning: load average %.1f on %d CPUs at the end: other tasks shared the producers' CPUs\n", load, cpus)
		}
	}
	if f.json {
		if err := doc.WriteJSON(os.Stdout); err != nil {
			return 1
		}
	}
	return status
}

// liveTrigger runs every case on the live kernel: the no-probe loop once,
// each probed case in each attach mode, at each CPU count, printing each
// line as it is measured.
func liveTrigger(ctx context.Context, f triggerFlags, doc *report.MapDocument, out io.Writer) error {
	groups := []string{"none"}
	groups = append(groups, f.attach...)
	for _, attach := range groups {
		header := false
		for _, c := range f.cases {
			if (c == uprobe.CaseNop) != (attach == "none") {
				continue
			}
			mode := uprobe.ModeMulti
			if attach != "none" {
				mode, _ = uprobe.ParseMode(attach)
			}
			for _, n := range f.cpus {
				res, err := uprobe.Trigger(ctx, uprobe.TriggerConfig{Case: c, Mode: mode, CPUs: n,
					Warmup: f.warmup, Duration: f.duration, Interval: f.interval})
				if err != nil {
					return fmt.Errorf("%s %s %d cpus: %w", c, attach, n, err)
				}
				mops := make([]float64, len(res.Samples))
				for i, s := range res.Samples {
					mops[i] = s / 1e6
				}
				mean, sd := report.MeanStddev(mops)
				r := doc.Add(report.TargetLive, report.VariantKernel, map[string]any{
					"attach": attach, "case": c, "cpus": n,
					"mops": mean, "mops_stddev": sd, "mops_runs": mops,
					"calls": res.Calls, "hits": res.Hits,
				})
				if !header {
					printTriggerHeader(out, r)
					header = true
				}
				fmt.Fprintln(out, uprobe.FormatTrigger(c, n, mean*1e6, sd*1e6))
			}
		}
	}
	return nil
}

func printTriggerHeader(w io.Writer, r report.Result) {
	switch {
	case r["target"] == report.TargetLive && r["attach"] == "none":
		fmt.Fprintf(w, "live kernel (%s), no probe: calls of the target\n", report.ThisMachine().Kernel)
	case r["target"] == report.TargetLive:
		fmt.Fprintf(w, "live kernel, BPF counter on a %s link: hits, each call checked counted\n", r["attach"])
	default:
		fmt.Fprintf(w, "%s %s:\n", r["target"], r["variant"])
	}
}

// printTrigger prints results in the seed's format, a header before each
// run of results with the same target, variant and attach.
func printTrigger(w io.Writer, rs []report.Result) {
	var last string
	for _, r := range rs {
		key := fmt.Sprint(r["target"], r["variant"], r["attach"])
		if key != last {
			printTriggerHeader(w, r)
			last = key
		}
		mean, _ := r["mops"].(float64)
		sd, _ := r["mops_stddev"].(float64)
		cpus, _ := r["cpus"].(int)
		c, _ := r["case"].(string)
		fmt.Fprintln(w, uprobe.FormatTrigger(c, cpus, mean*1e6, sd*1e6))
	}
}

// loadAvg reads the one-minute load average, where the OS has /proc/loadavg.
func loadAvg() (float64, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	var l float64
	_, err = fmt.Sscan(string(b), &l)
	return l, err == nil
}
