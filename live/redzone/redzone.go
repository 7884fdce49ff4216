// Package redzone is the live side of the red-zone experiment
// (mmlab/experiment/redzone): the red-zone target of package uprobe on the
// running kernel, without a probe, with one on its nop (an int3 at every
// hit) and with one on its nop5 (which x86-64 optimizes since v6.18), in
// every attach mode.
package redzone

import (
	"context"
	"fmt"

	"mmlab/experiment"
	"mmlab/experiment/redzone"
	"mmlab/live/uprobe"
)

// Run measures the target without a probe, then in each attach mode with a
// probe on the nop and on the nop5, and emits each result when measured;
// the nop5's carries its rate's ratio to the nop's of the same mode. The
// first of o.Samples+1 samples is the warm-up: it counts in the red-zone
// check (its first call is the probe's first hit), not in the rate. Rates
// are per CPU-second of the calling thread (user and system time).
func Run(ctx context.Context, o *redzone.Options, env experiment.Env, emit func(redzone.Result)) error {
	if err := uprobe.Supported(); err != nil {
		return err
	}
	optimized := uprobe.HasOptimizedUprobes()
	o.OptimizedUprobes, o.LiveClock = &optimized, "thread-cpu"
	row := experiment.LiveRow
	measure := func(site, group string, mode uprobe.Mode) (redzone.Result, error) {
		res, err := uprobe.RedZone(ctx, uprobe.RedZoneConfig{Site: siteName(site),
			Mode: mode, Calls: uint64(o.Calls), Samples: o.Samples + 1})
		if err != nil {
			return redzone.Result{}, fmt.Errorf("%s %s: %w", site, group, err)
		}
		r := redzone.NewResult(row, group, site, res.CPUSamples[1:], res.Calls, res.Hits, res.Corrupted, res.Mask)
		env.Progress("%s, %s: %.3f M/s, %d of %d calls found %s changed", group, site, r.Mops, r.Corrupted, r.Calls, redzone.Slots(r.Mask))
		return r, nil
	}
	none, err := measure(redzone.SiteNone, "none", 0)
	if err != nil {
		return err
	}
	emit(none)
	for _, group := range o.Attach {
		mode, _ := uprobe.ParseMode(group)
		int3, err := measure(redzone.SiteNop, group, mode)
		if err != nil {
			return err
		}
		int3.SetHitNs(none)
		emit(int3)
		r, err := measure(redzone.SiteNop5, group, mode)
		if err != nil {
			return err
		}
		r.SetHitNs(none)
		r.VsInt3 = redzone.RatioOfMeans(r, int3)
		emit(r)
	}
	return nil
}

// siteName is package uprobe's name of a site.
func siteName(site string) string {
	switch site {
	case redzone.SiteNop:
		return uprobe.RedZoneNop
	case redzone.SiteNop5:
		return uprobe.RedZoneNop5
	}
	return uprobe.RedZoneNone
}
