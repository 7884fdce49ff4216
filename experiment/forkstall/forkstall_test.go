package forkstall

import (
	"context"
	"testing"
	"time"

	"mmlab/report"
	"mmlab/uprobes"
)

// A short run of every busy case and of each registration path, in both
// designs: every task ends, the figures are filled in, and the passes are
// the design's (none counted before; after, at least one per
// register_for_each_vma: 1 register + 1 unregister for multi-1, and 4
// registers, 4 applies, 4 applies and 4 unregisters for perf-4).
func TestRunModelShort(t *testing.T) {
	minPasses := map[string]int64{ModeMulti1: 2, ModePerf4: 16}
	for _, d := range []uprobes.Design{uprobes.DesignBefore, uprobes.DesignAfter} {
		for _, c := range []string{CaseBusyMaps, CaseBusyForks} {
			for _, m := range []string{ModeMulti1, ModePerf4} {
				t.Run(d.String()+"/"+c+"/"+m, func(t *testing.T) {
					res, err := RunModel(context.Background(), Options{Design: d, Case: c, Mode: m, Runs: 2,
						Pages: 1 << 12, Hold: time.Millisecond})
					if err != nil {
						t.Fatal(err)
					}
					if len(res.Runs) != 2 {
						t.Fatalf("%d runs, want 2", len(res.Runs))
					}
					for _, r := range res.Runs {
						if r.AttachMs <= 0 || r.DetachMs <= 0 {
							t.Errorf("run %+v: no attach or detach time", r)
						}
						if d == uprobes.DesignBefore && r.Passes != 0 {
							t.Errorf("before design counted %d passes", r.Passes)
						}
						if d == uprobes.DesignAfter && r.Passes < minPasses[m] {
							t.Errorf("after design: %d passes, want at least %d", r.Passes, minPasses[m])
						}
					}
					doc := report.New("forkstall", nil)
					got := res.Add(doc)
					for _, k := range []string{"fork_max_ms", "attach_ms", "detach_ms", "baseline_ms",
						"fork_blocked_dup_mmap_sem_ms", "fork_blocked_mmap_lock_ms", "attach_ms_runs"} {
						if _, ok := got[k]; !ok {
							t.Errorf("result has no %s", k)
						}
					}
					if got["variant"] != d.String() || got["case"] != c || got["mode"] != m {
						t.Errorf("result keys %v %v %v", got["variant"], got["case"], got["mode"])
					}
				})
			}
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{
		{Case: "nope", Mode: ModeMulti1},
		{Case: CaseIdle1000, Mode: "nope"},
		{Case: CaseBusyMaps, Mode: ModeMulti1}, // no size
	} {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// Calibrate returns a size whose populate held the lock at least as long as
// asked.
func TestCalibrate(t *testing.T) {
	pages, hold, err := Calibrate(context.Background(), 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if pages == 0 || hold < 5*time.Millisecond {
		t.Fatalf("pages %d hold %v", pages, hold)
	}
}
