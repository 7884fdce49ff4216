package maptear

import (
	"context"
	"errors"
	"testing"

	"mmlab/experiment"
	"mmlab/machine"
	"mmlab/procfs"
)

// runModel runs the check of o on the model with variants.
func runModel(t *testing.T, o *Options, variants ...string) []Result {
	t.Helper()
	var res []Result
	env := experiment.Env{Machine: machine.MustNamed("x86-64"), Variants: variants}
	if err := Model(context.Background(), o, env, func(r Result) { res = append(res, r) }); err != nil {
		t.Fatal(err)
	}
	return res
}

// Both model walks keep the promise: duplicates allowed, never a gap, the
// query finds the old or the new VMA. Each case must have seen the change.
func TestModelWalksNeverTear(t *testing.T) {
	o := &Options{Cases: Cases, File: "maps", Reads: 3000}
	res := runModel(t, o, procfs.Variants.Names()...)
	if len(res) != len(Cases)*len(procfs.Variants.Names()) {
		t.Fatalf("%d results, want %d", len(res), len(Cases)*len(procfs.Variants.Names()))
	}
	for _, r := range res {
		t.Logf("%+v", r)
		if r.Failed() {
			t.Errorf("%s %s: torn: %+v", r.Variant, r.Case, r)
		}
		if r.Reads != o.Reads || r.Queries != o.Reads || r.Modified == 0 {
			t.Errorf("%s %s: %d reads, %d saw the change: the race did not run", r.Variant, r.Case, r.Reads, r.Modified)
		}
	}
	if line, failed := Verdict(o, res); failed {
		t.Errorf("verdict %q on a clean run", line)
	}
}

// Cancelled, the check emits the case it was in and returns why.
func TestModelCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var res []Result
	err := Model(ctx, &Options{Cases: Cases, File: "maps", Reads: 10}, experiment.Env{Machine: machine.MustNamed("x86-64"), Variants: []string{"after"}}, func(r Result) { res = append(res, r) })
	if !errors.Is(err, context.Canceled) || len(res) != 0 {
		t.Fatalf("cancelled before the first case: %v, %d results", err, len(res))
	}
}

func TestModelHasNoSmaps(t *testing.T) {
	err := Model(context.Background(), &Options{Cases: Cases, File: "smaps", Reads: 10}, experiment.Env{Machine: machine.MustNamed("x86-64"), Variants: []string{"after"}}, func(Result) {})
	if err == nil {
		t.Fatal("the model ran smaps")
	}
}
