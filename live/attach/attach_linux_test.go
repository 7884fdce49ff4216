package attach

import (
	"context"
	"testing"

	"mmlab/experiment"
	"mmlab/experiment/attach"
	"mmlab/live/livetest"
	"mmlab/live/uprobe"
)

// One result per (n, mode), each with every run's times, and the first hit
// of a nop5 probe after the attach optimized the site where the kernel has
// optimized uprobes.
func TestRun(t *testing.T) {
	livetest.NeedUprobes(t)
	o := livetest.Options(t, attach.NewOptions(), "--n", "1,2", "--runs", "2", "--gap", "0")
	var rs []attach.Result
	env := experiment.Env{Progress: func(string, ...any) {}}
	if err := Run(context.Background(), o, env, func(r attach.Result) { rs = append(rs, r) }); err != nil {
		t.Fatal(err)
	}
	if len(rs) != 4 {
		t.Fatalf("%d results, want 4", len(rs))
	}
	for i, r := range rs {
		if r.Target != experiment.Live || r.N != []int{1, 1, 2, 2}[i] || r.Attach != o.Attach[i%2] ||
			len(r.AttachMsRuns) != 2 || len(r.DetachMsRuns) != 2 || r.AttachMs <= 0 || r.DetachMs <= 0 {
			t.Errorf("result %d: %+v", i, r)
		}
		if f := r.FirstHit; f == nil || len(f.FirstHitUsRuns) != 2 || len(f.HitUsRuns) != 2 || f.FirstHitUs <= 0 || f.HitUs <= 0 ||
			f.Optimized != uprobe.HasOptimizedUprobes() {
			t.Errorf("result %d: first hit %+v, want the site optimized: %v", i, f, uprobe.HasOptimizedUprobes())
		}
	}
	if o.Probed == "" {
		t.Error("no probed path in the params")
	}
}
