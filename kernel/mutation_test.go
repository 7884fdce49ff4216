package kernel_test

import (
	"strings"
	"testing"

	"mmlab/explore"
	"mmlab/kernel"
)

// Each of seed 000's after-design fixes of dup_mm undone alone (UndoFix):
// the explorer finds it in the scenario that exercises it. perf-inherit and
// reg-vs-fork pass their first schedules in the after design; failed-fork
// fails there too, by the registration's exit_mmap of the half-built child
// under dup_mmap_sem, so the undone fix is told apart by where the teardown
// runs: in dup_mm, by the forking task.
func TestExplorerFindsUndoneFix(t *testing.T) {
	for _, c := range []struct {
		mut, scenario string
		prop          explore.Property
		detail        string // in the violation's detail
		afterPasses   bool
	}{
		{kernel.MutForkTrylock, "reg-vs-fork", explore.PropStall, "T3(forker) sleeps on mmap_lock", true},
		{kernel.MutEarlyMM, "perf-inherit", explore.PropInherit, "but the child", true},
		{kernel.MutTeardownOutside, "failed-fork", explore.PropTeardown, "at dup_mm mmput failed child", false},
	} {
		t.Run(c.mut, func(t *testing.T) {
			sc := explore.Lookup(c.scenario)
			o := explore.Options{Design: explore.After, Schedules: 1500, Seed: 1}
			if c.afterPasses {
				if rep := explore.Explore(sc, o); rep.Failure != nil {
					t.Fatalf("%s fails in the after design: %v", c.scenario, rep.Failure.Violation)
				}
			}
			kernel.UndoFix(t, c.mut)
			rep := explore.Explore(sc, o)
			if rep.Failure == nil {
				t.Fatalf("%s: %d schedules and the undone fix went unnoticed", c.scenario, rep.Schedules)
			}
			if v := rep.Failure.Violation; v.Property != c.prop || !strings.Contains(v.Detail, c.detail) {
				t.Fatalf("%s: the undone fix failed %v, want %s with %q", c.scenario, v, c.prop, c.detail)
			}
			t.Logf("found in schedule %d: %v (%d deviations)", rep.Failure.Schedule, rep.Failure.Violation, len(rep.Failure.Deviations))
		})
	}
}
