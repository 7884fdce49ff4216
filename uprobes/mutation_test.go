package uprobes_test

import (
	"testing"

	"mmlab/explore"
	"mmlab/uprobes"
)

// mutationSchedules is how many schedules each side of a mutation test
// runs: the after design must pass them all, the mutated one fail.
const mutationSchedules = 1500

// Each of seed 000's after-design fixes in uprobes undone alone (UndoFix):
// the explorer, which finds nothing in the scenario's first schedules in
// the after design, finds the undone fix there as the property the fix is
// about.
func TestExplorerFindsUndoneFix(t *testing.T) {
	for _, c := range []struct {
		mut, scenario string
		props         []explore.Property
	}{
		{uprobes.MutRegisterTrylock, "reg-vs-fork", []explore.Property{explore.PropStall}},
		{uprobes.MutKilledRemoval, "killed-unregister", []explore.Property{explore.PropKilledClean}},
		// A site the killed first hit left half-optimized is restored by
		// its first byte only: a corrupted instruction stays.
		{uprobes.MutFinishHalfway, "unoptimize-kill", []explore.Property{explore.PropAgree, explore.PropKilledClean}},
		{uprobes.MutNoWarn, "unoptimize-kill", []explore.Property{explore.PropWarn}},
		{uprobes.MutPutOutside, "exit-during-register", []explore.Property{explore.PropTeardown}},
	} {
		t.Run(c.mut, func(t *testing.T) {
			o := explore.Options{Design: explore.After, Schedules: mutationSchedules, Seed: 1}
			rep, err := explore.FindUndoneFix(explore.Lookup(c.scenario), o, func(w *explore.World) { uprobes.UndoFix(t, w.U, c.mut) }, c.props)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("found in schedule %d: %v (%d deviations)", rep.Failure.Schedule, rep.Failure.Violation, len(rep.Failure.Deviations))
		})
	}
}
