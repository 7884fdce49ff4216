package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"mmlab/live/uprobe"
	"mmlab/report"
)

// attachFlags is what `mmlab run attach` was asked for; the model target
// reads the same options.
type attachFlags struct {
	target  string // model, live or both
	variant string // model: srcu or tasks-trace ("" both)
	modes   []string
	ns      []int
	runs    int
	gap     time.Duration
	json    bool
}

func init() {
	registerExperiment(&command{
		name:    "attach",
		summary: "uprobes: time to attach and to detach N uprobes (uprobe_multi and perf)",
		run:     runAttach,
		quick: func(ctx context.Context) int {
			return runAttach(ctx, []string{"--n", "1,4", "--runs", "3"})
		},
		order: 35,
	})
}

func parseAttach(args []string) (attachFlags, error) {
	var f attachFlags
	fs := flag.NewFlagSet("attach", flag.ContinueOnError)
	fs.StringVar(&f.target, "target", "both", "model, live, or both")
	fs.StringVar(&f.variant, "variant", "", "model protection: srcu or tasks-trace (default: both)")
	modes := fs.String("attach", "uprobe_multi,perf", "comma-separated attach modes")
	ns := fs.String("n", "1,4,64", "comma-separated probe counts (at most 64)")
	fs.IntVar(&f.runs, "runs", 5, "attach/detach cycles per mode and count (the median is reported)")
	fs.DurationVar(&f.gap, "gap", 200*time.Millisecond, "live: pause before each attach, so that every attach starts cold (0: back to back)")
	fs.BoolVar(&f.json, "json", false, "print one JSON document in the common schema instead of the table")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: mmlab run attach [--target model|live|both] [--n 1,4,64] [--runs R] [--attach uprobe_multi,perf] [--json]

Attaches N uprobes on N distinct nops of a sled in the mmlab binary, which the
running mmlab maps, then detaches them; times both. uprobe_multi is one link
with N offsets, perf is N perf-event uprobes each linked to the program.
Detach includes the kernel's uprobe_unregister_sync (an RCU Tasks Trace grace
period): once per link, so N times in perf mode. Attach takes dup_mmap_sem for
write; when that per-CPU rwsem has been idle, percpu_down_write() first waits
for a normal RCU grace period (rcu_sync_enter). A pause of --gap before each
attach lets that state go idle, so every attach pays it, as an agent that
attaches now and then does; with --gap 0 attach times are bimodal.
Live needs Linux and root.

`)
		fs.PrintDefaults()
	}
	if err := parseArgs(fs, args); err != nil {
		return f, err
	}
	if err := checkTarget(f.target, f.variant, "srcu", "tasks-trace"); err != nil {
		return f, err
	}
	for _, a := range strings.Split(*modes, ",") {
		m, err := uprobe.ParseMode(a)
		if err != nil {
			return f, fmt.Errorf("--attach: %w", err)
		}
		f.modes = append(f.modes, m.String())
	}
	for _, s := range strings.Split(*ns, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > uprobe.SledLen {
			return f, fmt.Errorf("--n: bad count %q (1..%d)", s, uprobe.SledLen)
		}
		f.ns = append(f.ns, n)
	}
	if f.gap < 0 {
		return f, fmt.Errorf("--gap %v: want 0 or more", f.gap)
	}
	if f.runs < 1 {
		return f, fmt.Errorf("--runs %d: want at least 1", f.runs)
	}
	return f, nil
}

func runAttach(ctx context.Context, args []string) int {
	f, err := parseAttach(args)
	if err == flag.ErrHelp {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mmlab run attach: %v\n", err)
		return 2
	}
	doc := report.New("attach", map[string]any{"runs": f.runs, "n": f.ns, "attach": f.modes, "gap_ms": f.gap.Milliseconds()})
	status := 0
	if f.target != "live" {
		if err := runModelAttach(ctx, f, doc); err != nil {
			fmt.Fprintf(os.Stderr, "mmlab run attach: model: %v\n", err)
			status = 1
		}
	}
	if f.target != "model" && ctx.Err() == nil {
		if err := uprobe.Supported(); err != nil {
			fmt.Fprintf(os.Stderr, "mmlab run attach: live skipped: %v\n", err)
		} else if err := liveAttachCost(ctx, f, doc); err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "mmlab run attach: live: %v\n", err)
			status = 1
		}
	}
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "mmlab run attach: interrupted; every probe it attached is detached")
		return 130
	}
	if f.json {
		if err := doc.WriteJSON(os.Stdout); err != nil {
			return 1
		}
		return status
	}
	printAttach(os.Stdout, doc)
	return status
}

// liveAttachCost times attach and detach on the live kernel. The runs go
// round-robin over counts and modes so that every cell sees the same
// machine. Attach is the link creation alone (the BPF program is loaded
// before the clock starts); detach is closing every link and the program.
func liveAttachCost(ctx context.Context, f attachFlags, doc *report.MapDocument) error {
	maxN := 0
	for _, n := range f.ns {
		maxN = max(maxN, n)
	}
	path, offsets, err := uprobe.SledOffsets(maxN)
	if err != nil {
		return err
	}
	doc.Params["probed"] = path
	type cell struct{ attach, detach []float64 }
	cells := map[string]*cell{}
	for range f.runs {
		for _, n := range f.ns {
			for _, m := range f.modes {
				mode, _ := uprobe.ParseMode(m)
				if err := sleepCtx(ctx, f.gap); err != nil {
					return err
				}
				p, err := uprobe.Attach(ctx, uprobe.Spec{Path: path, Offsets: offsets[:n], Mode: mode})
				if err != nil {
					return fmt.Errorf("%s n=%d: %w", m, n, err)
				}
				start := time.Now()
				err = p.Close()
				detach := time.Since(start)
				if err != nil {
					return fmt.Errorf("%s n=%d: %w", m, n, err)
				}
				key := fmt.Sprint(m, n)
				if cells[key] == nil {
					cells[key] = &cell{}
				}
				c := cells[key]
				c.attach = append(c.attach, ms(p.LinkTime()))
				c.detach = append(c.detach, ms(detach))
			}
		}
	}
	for _, n := range f.ns {
		for _, m := range f.modes {
			c := cells[fmt.Sprint(m, n)]
			doc.Add(report.TargetLive, report.VariantKernel, map[string]any{
				"attach": m, "n": n,
				"attach_ms": report.Median(c.attach), "attach_ms_runs": c.attach,
				"detach_ms": report.Median(c.detach), "detach_ms_runs": c.detach,
			})
		}
	}
	return nil
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// printAttach prints one line per result: median and range of the runs.
func printAttach(w io.Writer, doc *report.MapDocument) {
	var last string
	for _, r := range doc.Results {
		key := fmt.Sprint(r["target"], r["variant"])
		if key != last {
			fmt.Fprintf(w, "attach/detach, %s %s (median of %v runs [min-max], ms)\n", r["target"], r["variant"], doc.Params["runs"])
			fmt.Fprintf(w, "  %-14s %4s  %-26s %s\n", "attach", "n", "attach ms", "detach ms")
			last = key
		}
		fmt.Fprintf(w, "  %-14s %4v  %-26s %s\n", r["attach"], r["n"],
			attachCell(r, "attach_ms"), attachCell(r, "detach_ms"))
	}
}

func attachCell(r report.Result, metric string) string {
	med, _ := r[metric].(float64)
	runs, _ := r[metric+"_runs"].([]float64)
	if len(runs) == 0 {
		return fmt.Sprintf("%.3f", med)
	}
	lo, hi := runs[0], runs[0]
	for _, x := range runs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return fmt.Sprintf("%.3f [%.3f-%.3f]", med, lo, hi)
}
