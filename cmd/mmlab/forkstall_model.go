package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	mforkstall "mmlab/experiment/forkstall"
	"mmlab/report"
	"mmlab/uprobes"
)

// The model side of `mmlab run forkstall`: package experiment/forkstall in
// both designs of seed 000 (or the one --variant names), case by case and
// mode by mode, the designs in turn. The busy size is calibrated first so
// that one populate holds the mmap lock for at least forkstallModelHold.

const forkstallModelHold = 300 * time.Millisecond

func runModelForkstall(ctx context.Context, f forkstallFlags, doc *report.MapDocument) error {
	designs := []uprobes.Design{uprobes.DesignBefore, uprobes.DesignAfter}
	if f.variant != "" {
		d, err := uprobes.ParseDesign(f.variant)
		if err != nil {
			return err
		}
		designs = []uprobes.Design{d}
	}
	progress := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "forkstall model: "+format+"\n", args...)
	}
	var pages uint64
	var hold time.Duration
	if slices.Contains(f.cases, mforkstall.CaseBusyMaps) || slices.Contains(f.cases, mforkstall.CaseBusyForks) {
		var err error
		if pages, hold, err = mforkstall.Calibrate(ctx, forkstallModelHold); err != nil {
			return err
		}
		progress("busy SIZE %d pages (%.1f GiB of model memory): one populate holds mmap_lock %.0f ms (target >= %.0f ms)",
			pages, float64(pages)*4096/(1<<30), float64(hold)/1e6, float64(forkstallModelHold)/1e6)
		doc.Params["model_size_bytes"] = pages * 4096
		doc.Params["model_populate_hold_ms"] = float64(hold) / 1e6
	}
	for _, c := range f.cases {
		for _, m := range f.modes {
			for _, d := range designs {
				res, err := mforkstall.RunModel(ctx, mforkstall.Options{Design: d, Case: c, Mode: m, Runs: f.runs,
					Pages: pages, Progress: progress})
				if err != nil {
					return fmt.Errorf("%s %s %s: %w", d, c, m, err)
				}
				r := res.Add(doc)
				progress("%s %s %s: fork_max %s ms (blocked on dup_mmap_sem %s, mmap_lock %s), baseline %s ms (blocked %s, %s), attach %s ms (tracer blocked on mmap_lock %s), detach %s ms, busy hold %s ms, passes %v",
					d, c, m, fmtMs(r["fork_max_ms"]), fmtMs(r["fork_blocked_dup_mmap_sem_ms"]), fmtMs(r["fork_blocked_mmap_lock_ms"]),
					fmtMs(r["baseline_ms"]), fmtMs(r["baseline_blocked_dup_mmap_sem_ms"]), fmtMs(r["baseline_blocked_mmap_lock_ms"]),
					fmtMs(r["attach_ms"]), fmtMs(r["attach_blocked_mmap_lock_ms"]), fmtMs(r["detach_ms"]), fmtMs(r["busy_hold_ms"]), r["passes"])
			}
		}
	}
	return nil
}
