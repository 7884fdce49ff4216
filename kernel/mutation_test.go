package kernel_test

import (
	"strings"
	"testing"

	"mmlab/explore"
	"mmlab/kernel"
)

// Each of seed 000's after-design fixes of dup_mm undone alone (UndoFix):
// the explorer finds it in the scenario that exercises it, all of which
// pass their first schedules in the after design. A child that lost its
// parent's breakpoint (the early-mm fix undone) is caught by whichever of
// the two properties that see it checks first: the child's inheritance at
// the fork's end, or the registry's agreement at the unregister's end.
func TestExplorerFindsUndoneFix(t *testing.T) {
	for _, c := range []struct {
		mut, scenario string
		props         []explore.Property
		detail        string // in the violation's detail
	}{
		{kernel.MutForkTrylock, "reg-vs-fork", []explore.Property{explore.PropStall}, "T3(forker) sleeps on mmap_lock"},
		{kernel.MutEarlyMM, "perf-inherit", []explore.Property{explore.PropInherit, explore.PropAgree}, "child of parent"},
		{kernel.MutTeardownOutside, "failed-fork", []explore.Property{explore.PropTeardown}, "at dup_mm mmput failed child"},
	} {
		t.Run(c.mut, func(t *testing.T) {
			o := explore.Options{Design: explore.After, Schedules: 1500, Seed: 1}
			rep, err := explore.FindUndoneFix(explore.Lookup(c.scenario), o, func(w *explore.World) { kernel.UndoFix(t, w.Mach, c.mut) }, c.props)
			if err != nil {
				t.Fatal(err)
			}
			if v := rep.Failure.Violation; !strings.Contains(v.Detail, c.detail) {
				t.Fatalf("%s: the undone fix failed %v, want %q in its detail", c.scenario, v, c.detail)
			}
			t.Logf("found in schedule %d: %v (%d deviations)", rep.Failure.Schedule, rep.Failure.Violation, len(rep.Failure.Deviations))
		})
	}
}
