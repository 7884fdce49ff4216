package kernel_test

import (
	"slices"
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
			sc := explore.Lookup(c.scenario)
			o := explore.Options{Design: explore.After, Schedules: 1500, Seed: 1}
			if rep := explore.Explore(sc, o); rep.Failure != nil {
				t.Fatalf("%s fails in the after design: %v", c.scenario, rep.Failure.Violation)
			}
			kernel.UndoFix(t, c.mut)
			rep := explore.Explore(sc, o)
			if rep.Failure == nil {
				t.Fatalf("%s: %d schedules and the undone fix went unnoticed", c.scenario, rep.Schedules)
			}
			if v := rep.Failure.Violation; !slices.Contains(c.props, v.Property) || !strings.Contains(v.Detail, c.detail) {
				t.Fatalf("%s: the undone fix failed %v, want one of %q with %q", c.scenario, v, c.props, c.detail)
			}
			t.Logf("found in schedule %d: %v (%d deviations)", rep.Failure.Schedule, rep.Failure.Violation, len(rep.Failure.Deviations))
		})
	}
}
