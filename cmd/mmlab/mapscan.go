package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"mmlab/experiment/mapscan"
	livemapscan "mmlab/live/mapscan"
	"mmlab/procfs"
	"mmlab/report"
)

func init() {
	registerExperiment(&command{
		name:    "mapscan",
		summary: "seed 003: mmap/munmap latency while nice-15 scanners read /proc/PID/maps (proc-mmap_sem-test)",
		run:     runMapscan,
		quick: func(ctx context.Context) int {
			return runMapscan(ctx, []string{"--runs", "1", "--duration", "300ms"})
		},
		order: 31,
	})
}

const mapscanUsage = `usage: mmlab run mapscan [--target model|live|both] [--variant before|after]
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
model also reports the mapper's time blocked on locks per call.

`

func runMapscan(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("mapscan", flag.ContinueOnError)
	target := fs.String("target", "both", "model, live, or both")
	variant := fs.String("variant", "", "model walk: before or after (default: both)")
	runs := fs.Int("runs", 3, "runs per case")
	duration := fs.Duration("duration", 2*time.Second, "how long the mapper is timed in each run")
	asJSON := fs.Bool("json", false, "print one JSON document in the common schema instead of the table")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), mapscanUsage)
		fs.PrintDefaults()
	}
	err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err == nil {
		err = checkTarget(*target, *variant, "before", "after")
	}
	if err == nil && (*runs < 1 || *duration <= 0) {
		err = errors.New("--runs and --duration must be positive")
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mmlab run mapscan: %v\n", err)
		return 2
	}
	doc := report.New("mapscan", map[string]any{"runs": *runs, "duration_ms": duration.Milliseconds(),
		"region_bytes": mapscan.RegionSize, "scanner_count": mapscan.NumScanners, "scanner_nice": mapscan.ScannerNice})
	type job struct {
		target, variant string
		run             func(context.Context, mapscan.Options) (mapscan.Stats, error)
	}
	var jobs []job
	if *target != "live" {
		variants := []string{"before", "after"}
		if *variant != "" {
			variants = []string{*variant}
		}
		for _, v := range variants {
			jobs = append(jobs, job{report.TargetModel, v, func(ctx context.Context, o mapscan.Options) (mapscan.Stats, error) {
				return mapscan.RunModel(ctx, procfs.Variant(v), o)
			}})
		}
	}
	if *target != "model" {
		jobs = append(jobs, job{report.TargetLive, report.VariantKernel, livemapscan.Run})
	}
	status := 0
	for _, j := range jobs {
		for _, c := range mapscan.Cases {
			var all []mapscan.Stats
			for r := range *runs {
				st, err := j.run(ctx, mapscan.Options{Scanners: c, Duration: *duration, Seed: uint64(r + 1)})
				if ctx.Err() != nil {
					return 130
				}
				if err != nil {
					fmt.Fprintf(os.Stderr, "mmlab run mapscan: %s %s %s: %v\n", j.target, j.variant, c, err)
					status = 1
					break
				}
				all = append(all, st)
			}
			if len(all) > 0 {
				doc.Add(j.target, j.variant, mapscanFields(c, all, j.target == report.TargetModel))
			}
		}
	}
	if *asJSON {
		if err := doc.WriteJSON(os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "mmlab run mapscan: %v\n", err)
			return 1
		}
		return status
	}
	printMapscan(doc)
	return status
}

// mapscanFields summarises the runs of one case as the seed does: the
// median of the means and the maximum of the maxima, with per-run lists.
func mapscanFields(scanners string, all []mapscan.Stats, model bool) map[string]any {
	col := func(f func(mapscan.Stats) float64) []float64 {
		xs := make([]float64, len(all))
		for i, s := range all {
			xs[i] = f(s)
		}
		return xs
	}
	ops, passes := 0, 0
	for _, s := range all {
		ops += s.Ops
		passes += s.ScanPasses
	}
	fields := map[string]any{"scanners": scanners, "runs": len(all), "ops": ops, "scan_passes": passes}
	metrics := []struct {
		name string
		f    func(mapscan.Stats) float64
		max  bool
	}{
		{"mmap_mean_us", func(s mapscan.Stats) float64 { return s.MmapMeanUS }, false},
		{"mmap_max_us", func(s mapscan.Stats) float64 { return s.MmapMaxUS }, true},
		{"munmap_mean_us", func(s mapscan.Stats) float64 { return s.MunmapMeanUS }, false},
		{"munmap_max_us", func(s mapscan.Stats) float64 { return s.MunmapMaxUS }, true},
		{"op_mean_us", func(s mapscan.Stats) float64 { return s.OpMeanUS }, false},
		{"op_max_us", func(s mapscan.Stats) float64 { return s.OpMaxUS }, true},
	}
	if model {
		metrics = append(metrics,
			struct {
				name string
				f    func(mapscan.Stats) float64
				max  bool
			}{"lock_wait_mean_us", func(s mapscan.Stats) float64 { return s.LockWaitMeanUS }, false},
			struct {
				name string
				f    func(mapscan.Stats) float64
				max  bool
			}{"lock_wait_max_us", func(s mapscan.Stats) float64 { return s.LockWaitMaxUS }, true})
	}
	for _, m := range metrics {
		xs := col(m.f)
		if m.max {
			fields[m.name] = report.Max(xs)
		} else {
			fields[m.name] = report.Median(xs)
		}
		fields[m.name+"_runs"] = xs
	}
	return fields
}

func printMapscan(doc *report.MapDocument) {
	fmt.Printf("mapscan: mapper latency under /proc/PID/maps scanners (%s)\n", doc.Machine.Kernel)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	cols := []string{"op_mean_us", "op_max_us", "mmap_mean_us", "mmap_max_us", "munmap_mean_us", "munmap_max_us", "lock_wait_mean_us", "lock_wait_max_us"}
	fmt.Fprintf(w, "target\tvariant\tscanners\truns\tops\tpasses\t%s\t\n", strings.Join(cols, "\t"))
	for _, r := range doc.Results {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t", r["target"], r["variant"], r["scanners"], r["runs"], r["ops"], r["scan_passes"])
		for _, c := range cols {
			if v, ok := r[c].(float64); ok {
				fmt.Fprintf(w, "%.1f\t", v)
			} else {
				fmt.Fprint(w, "-\t")
			}
		}
		fmt.Fprintln(w)
	}
	w.Flush()
	// The seed's comparison: after against before, two text scanners.
	find := func(variant, key string) (float64, bool) {
		for _, r := range doc.Results {
			if r["target"] == report.TargetModel && r["variant"] == variant && r["scanners"] == "text" {
				v, ok := r[key].(float64)
				return v, ok
			}
		}
		return 0, false
	}
	for _, k := range []string{"op_max_us", "lock_wait_max_us"} {
		b, ok1 := find("before", k)
		a, ok2 := find("after", k)
		if ok1 && ok2 && a > 0 {
			fmt.Printf("model, text scanners: %s before/after = %.1fx\n", k, b/a)
		}
	}
}
