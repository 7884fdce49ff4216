package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"mmlab/live/forkstall"
	"mmlab/live/uprobe"
	"mmlab/report"
)

type forkstallFlags struct {
	target, variant string
	runs            int
	full, json      bool
	size            uint64
	cases, modes    []string
}

func init() {
	// A re-executed mmlab may be one of the experiment's helper processes.
	forkstall.ChildMain()
	registerExperiment(&command{
		name:    "forkstall",
		summary: "seed 000: does fork() stall while uprobes attach to a busy process?",
		run:     runForkstall,
		quick: func(ctx context.Context) int {
			return runForkstall(ctx, []string{"--runs", "3", "--size", "1G", "--cases", "busy-maps,idle-1000", "--modes", "multi-1"})
		},
		order: 40,
	})
}

func parseForkstall(args []string) (forkstallFlags, error) {
	var f forkstallFlags
	fs := flag.NewFlagSet("forkstall", flag.ContinueOnError)
	fs.StringVar(&f.target, "target", "both", "model, live, or both")
	fs.StringVar(&f.variant, "variant", "", "model design: before or after (default: both)")
	fs.IntVar(&f.runs, "runs", 9, "attach/detach cycles per case and mode (the median is reported)")
	fs.BoolVar(&f.full, "full", false, "also run idle-5000 (5000 processes map the probed file)")
	fs.BoolVar(&f.json, "json", false, "print one JSON document in the common schema instead of the table")
	size := fs.String("size", "2G", "live: bytes the busy process populates each cycle (K, M, G suffixes)")
	cases := fs.String("cases", "", "comma-separated cases (default busy-maps,busy-forks,idle-1000[,idle-5000])")
	modes := fs.String("modes", "multi-1,multi-4,perf-4", "comma-separated modes")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: mmlab run forkstall [--target model|live|both] [--variant before|after] [--runs N] [--full] [--json]

A busy process loops mmap(SIZE, MAP_POPULATE)/munmap, a forker loops fork(),
and a tracer attaches, holds and detaches uprobes. The figure is the longest
fork() that started inside an attach or detach window (median over runs).
Cases: busy-maps (the busy process maps the probed file), busy-forks (a second
thread of the busy process forks; it does not map the file), idle-1000 and
idle-5000 (nobody busy; N processes map the file). Modes: multi-1, multi-4
(one uprobe_multi link with 1 or 4 uprobes), perf-4 (4 perf-event uprobes).
The live run ends with "verdict: stalls|ok": stalls when the longest fork
exceeds 10x the quiet baseline (busy running, nothing attaching, same window
length) and 50 ms. Live needs Linux and root.

`)
		fs.PrintDefaults()
	}
	if err := parseArgs(fs, args); err != nil {
		return f, err
	}
	n, err := parseSize(*size)
	if err != nil {
		return f, fmt.Errorf("--size: %w", err)
	}
	f.size = n
	if *cases == "" {
		*cases = "busy-maps,busy-forks,idle-1000"
		if f.full {
			*cases += ",idle-5000"
		}
	}
	f.cases = strings.Split(*cases, ",")
	f.modes = strings.Split(*modes, ",")
	return f, checkTarget(f.target, f.variant, "before", "after")
}

// parseSize reads a byte count with an optional K, M or G suffix.
func parseSize(s string) (uint64, error) {
	mult := uint64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	}
	var n uint64
	if _, err := fmt.Sscan(s, &n); err != nil || n == 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

func runForkstall(ctx context.Context, args []string) int {
	f, err := parseForkstall(args)
	if err == flag.ErrHelp {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mmlab run forkstall: %v\n", err)
		return 2
	}
	doc := report.New("forkstall", map[string]any{"runs": f.runs, "size_bytes": f.size, "cases": f.cases, "modes": f.modes})
	status := 0
	if f.target != "live" {
		if err := runModelForkstall(ctx, f, doc); err != nil {
			fmt.Fprintf(os.Stderr, "mmlab run forkstall: model: %v\n", err)
			status = 1
		}
	}
	if f.target != "model" {
		if err := liveForkstall(ctx, f, doc); err != nil {
			fmt.Fprintf(os.Stderr, "mmlab run forkstall: live: %v\n", err)
			status = 1
		}
	}
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "mmlab run forkstall: interrupted; every process and probe it started is gone")
		return 130
	}
	if f.json {
		if err := doc.WriteJSON(os.Stdout); err != nil {
			return 1
		}
		return status
	}
	printForkstall(os.Stdout, doc)
	return status
}

// liveAttach attaches the experiment's probes with the live uprobe package.
func liveAttach(ctx context.Context, path string, offsets []uint64, mode string) (func() error, error) {
	m := uprobe.ModeMulti
	if strings.HasPrefix(mode, "perf") {
		m = uprobe.ModePerf
	}
	p, err := uprobe.Attach(ctx, uprobe.Spec{Path: path, Offsets: offsets, Mode: m})
	if err != nil {
		return nil, err
	}
	return p.Close, nil
}

func liveForkstall(ctx context.Context, f forkstallFlags, doc *report.MapDocument) error {
	if err := uprobe.Supported(); err != nil {
		return err
	}
	var worstX, worstY float64
	for _, c := range f.cases {
		for _, m := range f.modes {
			o := forkstall.Options{Case: c, Mode: m, Runs: f.runs, Size: f.size, Attach: liveAttach,
				Progress: func(format string, args ...any) {
					fmt.Fprintf(os.Stderr, "forkstall live: "+format+"\n", args...)
				}}
			res, err := forkstall.RunLive(ctx, o)
			if err != nil {
				return fmt.Errorf("%s %s: %w", c, m, err)
			}
			res.Add(doc)
			if x := res.ForkMaxMs(); x > worstX || worstX == 0 {
				worstX, worstY = x, res.BaselineMs()
			}
		}
	}
	verdict := forkstall.Verdict(worstX, worstY)
	doc.Params["verdict"] = verdict
	doc.Params["verdict_line"] = fmt.Sprintf("verdict: %s fork_max_ms=%.2f baseline_ms=%.2f", verdict, worstX, worstY)
	return nil
}

var forkstallCaseTitles = map[string]string{
	forkstall.CaseBusyMaps:  "the busy process maps the file",
	forkstall.CaseBusyForks: "it forks and doesn't map the file",
	forkstall.CaseIdle1000:  "nobody keeps mmap_lock busy, 1000 processes map the file",
	forkstall.CaseIdle5000:  "nobody keeps mmap_lock busy, 5000 processes map the file",
}

var forkstallModeTitles = map[string]string{
	forkstall.ModeMulti1: "uprobe_multi, 1 uprobe",
	forkstall.ModeMulti4: "uprobe_multi, 4 uprobes",
	forkstall.ModePerf4:  "perf_event, 4 uprobes",
}

// printForkstall prints the seed's table: for each target, the longest fork
// and the attach time per variant, then the live verdict.
func printForkstall(w io.Writer, doc *report.MapDocument) {
	for _, target := range []string{report.TargetModel, report.TargetLive} {
		var variants []string
		for _, r := range doc.Results {
			v := r["variant"].(string)
			if r["target"] == target && !strings.Contains(strings.Join(variants, ","), v) {
				variants = append(variants, v)
			}
		}
		if len(variants) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nforkstall, %s (median of %v runs; ms)\n", target, doc.Params["runs"])
		head := fmt.Sprintf("%-40s", "")
		sub := fmt.Sprintf("%-40s", "")
		for _, col := range []string{"fork() ms", "attach ms", "detach ms"} {
			head += fmt.Sprintf("%-*s", 9*len(variants)+2, col)
			for _, v := range variants {
				sub += fmt.Sprintf("%-9s", v)
			}
			sub += "  "
		}
		if target == report.TargetLive {
			head += "quiet fork ms"
		}
		fmt.Fprintln(w, head)
		fmt.Fprintln(w, strings.TrimRight(sub, " "))
		lastCase := ""
		for _, r := range doc.Results {
			if r["target"] != target || r["variant"] != variants[0] {
				continue
			}
			c, m := r["case"].(string), r["mode"].(string)
			if c != lastCase {
				fmt.Fprintln(w, forkstallCaseTitles[c])
				lastCase = c
			}
			line := fmt.Sprintf("  %-38s", forkstallModeTitles[m])
			for _, metric := range []string{"fork_max_ms", "attach_ms", "detach_ms"} {
				for _, v := range variants {
					line += fmt.Sprintf("%-9s", fmtMs(find(doc, target, v, c, m)[metric]))
				}
				line += "  "
			}
			if target == report.TargetLive {
				line += fmtMs(r["baseline_ms"])
			}
			fmt.Fprintln(w, strings.TrimRight(line, " "))
		}
	}
	if v, ok := doc.Params["verdict_line"]; ok {
		fmt.Fprintln(w, v)
	}
}

func find(doc *report.MapDocument, target, variant, c, m string) report.Result {
	for _, r := range doc.Results {
		if r["target"] == target && r["variant"] == variant && r["case"] == c && r["mode"] == m {
			return r
		}
	}
	return report.Result{}
}

// fmtMs prints a millisecond figure with three significant digits.
func fmtMs(v any) string {
	x, ok := v.(float64)
	if !ok {
		return "-"
	}
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	case x >= 1:
		return fmt.Sprintf("%.2f", x)
	}
	return fmt.Sprintf("%.3f", x)
}
