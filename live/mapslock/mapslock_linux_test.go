package mapslock

import (
	"context"
	"testing"

	"mmlab/experiment"
	"mmlab/experiment/mapslock"
)

// TestRun runs the live probe in a small setting and checks what it
// reports: every run took a hold, and the probe was under way in it.
func TestRun(t *testing.T) {
	o := mapslock.Def.NewOptions()
	o.Runs, o.Size = 3, 64<<20
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	var got []mapslock.Result
	env := experiment.Env{Progress: t.Logf}
	if err := Run(context.Background(), o, env, func(r mapslock.Result) { got = append(got, r) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(mapslock.Cases) {
		t.Fatalf("%d results, want %d", len(got), len(mapslock.Cases))
	}
	for i, r := range got {
		if r.Case != mapslock.Cases[i] || r.Target != experiment.Live || len(r.HoldMsRuns) != 3 || r.HoldMs <= 0 {
			t.Errorf("result %+v", r)
		}
	}
	// An interrupted probe says so.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Run(ctx, o, env, func(mapslock.Result) { t.Error("a result after the interrupt") }); err != context.Canceled {
		t.Errorf("interrupted run: %v", err)
	}
}
