package forkstall

import (
	"context"
	"strings"
	"testing"
	"time"

	"mmlab/experiment"
	"mmlab/kernel"
	"mmlab/machine"
)

// A short run of every busy case and of each registration path, in both
// designs: every task ends, the figures are filled in, and the passes are
// the design's (none counted before; after, at least one per
// register_for_each_vma: 1 register + 1 unregister for multi-1, and 4
// registers, 4 applies, 4 applies and 4 unregisters for perf-4).
func TestRunModelShort(t *testing.T) {
	minPasses := map[string]int64{ModeMulti1: 2, ModePerf4: 16}
	for _, d := range kernel.Designs.Values() {
		for _, c := range []string{CaseBusyMaps, CaseBusyForks} {
			for _, m := range []string{ModeMulti1, ModePerf4} {
				t.Run(d.String()+"/"+c+"/"+m, func(t *testing.T) {
					runs, err := runCase(context.Background(), caseRun{Machine: machine.MustNamed("x86-64"), Design: d, Case: c, Mode: m, Runs: 2,
						Size: 1 << 20, BusyHold: 2 * time.Millisecond, Hold: time.Millisecond})
					if err != nil {
						t.Fatal(err)
					}
					if len(runs) != 2 {
						t.Fatalf("%d runs, want 2", len(runs))
					}
					for _, r := range runs {
						if r.AttachMs <= 0 || r.DetachMs <= 0 {
							t.Errorf("run %+v: no attach or detach time", r)
						}
						if d == kernel.DesignBefore && r.Passes != 0 {
							t.Errorf("before design counted %d passes", r.Passes)
						}
						if d == kernel.DesignAfter && r.Passes < minPasses[m] {
							t.Errorf("after design: %d passes, want at least %d", r.Passes, minPasses[m])
						}
					}
				})
			}
		}
	}
}

// A busy case without a size or a hold is refused.
func TestRunCaseNeedsSize(t *testing.T) {
	for _, o := range []caseRun{{Size: 1 << 20}, {BusyHold: time.Millisecond}} {
		o.Case, o.Mode, o.Runs = CaseBusyMaps, ModeMulti1, 1
		if _, err := runCase(context.Background(), o); err == nil {
			t.Errorf("busy case with size %d, hold %v ran", o.Size, o.BusyHold)
		}
	}
}

// The model runner emits one result per (case, mode, design), the designs
// innermost, before and after side by side in the seed's table; the idle
// cases record no size and no busy hold.
func TestModelResultsAndTable(t *testing.T) {
	o := parse(t, "--runs", "1", "--cases", "idle-1000", "--modes", "multi-1,perf-4")
	var rs []Result
	env := experiment.Env{Machine: machine.MustNamed("x86-64"), Variants: Def.Variants, Progress: func(string, ...any) {}}
	if err := Model(context.Background(), o, env, func(r Result) { rs = append(rs, r) }); err != nil {
		t.Fatal(err)
	}
	if len(rs) != 4 {
		t.Fatalf("%d results, want 4", len(rs))
	}
	for i, r := range rs {
		wantMode := []string{"multi-1", "multi-1", "perf-4", "perf-4"}[i]
		wantVariant := []string{"before", "after"}[i%2]
		if r.Target != experiment.Model || r.Variant != wantVariant || r.Case != "idle-1000" || r.Mode != wantMode {
			t.Errorf("result %d: %v %v %v %v", i, r.Target, r.Variant, r.Case, r.Mode)
		}
		if r.AttachMs <= 0 || r.ModelFigures == nil || r.SizeBytes != 0 || r.Verdict != "" {
			t.Errorf("result %d: %+v", i, r)
		}
	}
	if o.ModelPopulateHoldMs != 0 {
		t.Errorf("idle cases recorded a populate hold of %v ms", o.ModelPopulateHoldMs)
	}
	var out strings.Builder
	Table(&out, o, rs)
	if !strings.Contains(out.String(), "before   after") || !strings.Contains(out.String(), "1000 processes map the file") {
		t.Errorf("table:\n%s", out.String())
	}
}

// A populate holds the busy mm's mmap lock for read when it says it
// started (a writer cannot get in, a reader can), and leaves the lock free
// and the region unmapped.
func TestPopulateLocks(t *testing.T) {
	b := kernel.NewTaskMM(new(kernel.Namespace), "busy", machine.MustNamed("x86-64").Features)
	defer b.ExitMM()
	vmas := len(b.MM.VMAs())
	calls := 0
	_, err := populate(b, 1<<20, time.Millisecond, func(time.Time) {
		calls++
		if b.MM.MmapWriteTrylock() {
			b.MM.MmapWriteUnlock()
			t.Error("write trylock succeeded during the populate")
		}
		if !b.MM.MmapReadTrylock() {
			t.Error("read trylock failed during the populate")
		} else {
			b.MM.MmapReadUnlock()
		}
		if len(b.MM.VMAs()) != vmas+1 {
			t.Errorf("%d VMAs during the populate, want %d", len(b.MM.VMAs()), vmas+1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("started called %d times, want 1", calls)
	}
	if !b.MM.MmapWriteTrylock() {
		t.Fatal("mmap lock still held after the populate")
	}
	b.MM.MmapWriteUnlock()
	if len(b.MM.VMAs()) != vmas {
		t.Errorf("%d VMAs after the populate, want %d", len(b.MM.VMAs()), vmas)
	}
}
