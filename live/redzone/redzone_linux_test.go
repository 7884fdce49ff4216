package redzone

import (
	"context"
	"errors"
	"testing"

	"mmlab/experiment"
	"mmlab/experiment/redzone"
	"mmlab/live/livetest"
	"mmlab/live/uprobe"
)

// No probe once, then a probe on the nop and one on the nop5 per attach
// mode; every call counted; the nop5's red zone is clobbered exactly when
// the kernel optimizes uprobes, and the verdict says so.
func TestRun(t *testing.T) {
	livetest.NeedUprobes(t)
	o := livetest.Options(t, redzone.NewOptions(), "--calls", "100", "--samples", "2")
	var rs []redzone.Result
	if err := Run(context.Background(), o, livetest.Quiet, func(r redzone.Result) { rs = append(rs, r) }); err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"none", redzone.SiteNone}, {"uprobe_multi", redzone.SiteNop}, {"uprobe_multi", redzone.SiteNop5},
		{"perf", redzone.SiteNop}, {"perf", redzone.SiteNop5}}
	if len(rs) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(rs), len(want), rs)
	}
	optimized := uprobe.HasOptimizedUprobes()
	for i, r := range rs {
		bad, mask := uint64(0), uint64(0)
		if r.Site == redzone.SiteNop5 && optimized {
			bad, mask = r.Calls-1, 0x0f
		}
		probed := r.Site != redzone.SiteNone
		if r.Target != experiment.Live || r.Attach != want[i][0] || r.Site != want[i][1] || r.Calls != 300 ||
			(probed && r.Hits != r.Calls) || r.Corrupted != bad || r.Mask != mask || len(r.MopsRuns) != 2 {
			t.Errorf("result %d: %+v", i, r)
		}
		if (r.VsInt3 != nil) != (r.Site == redzone.SiteNop5) || (probed && r.HitNs == 0) {
			t.Errorf("result %d: ratio %+v, %v ns per hit", i, r.VsInt3, r.HitNs)
		}
	}
	_, corrupts, found := redzone.Judge(rs)
	if !found || corrupts != optimized {
		t.Errorf("judged: found %v, corrupts %v; the kernel optimizes: %v", found, corrupts, optimized)
	}
}

// A cancelled run stops with the context's error and emits nothing.
func TestRunStopsOnCancel(t *testing.T) {
	livetest.NeedUprobes(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n := 0
	if err := Run(ctx, livetest.Options(t, redzone.NewOptions()), livetest.Quiet, func(redzone.Result) { n++ }); !errors.Is(err, context.Canceled) || n != 0 {
		t.Errorf("Run on a cancelled context: %v, %d results", err, n)
	}
}
