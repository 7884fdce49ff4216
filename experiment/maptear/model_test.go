package maptear

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"mmlab/experiment"
	"mmlab/machine"
	"mmlab/procfs"
)

// runModel runs the check of o on the model with variants.
func runModel(t *testing.T, o *Options, variants ...string) []Result {
	t.Helper()
	return runIn(t, o, experiment.Env{Machine: machine.MustNamed("x86-64"), Variants: variants})
}

// runIn runs the check of o in env and returns its results.
func runIn(t *testing.T, o *Options, env experiment.Env) []Result {
	t.Helper()
	var res []Result
	if err := Model(context.Background(), o, env, func(r Result) { res = append(res, r) }); err != nil {
		t.Fatal(err)
	}
	return res
}

// wantEach fails t unless res holds as many results as one for each of
// cases in each variant of procfs.Variants.
func wantEach(t *testing.T, res []Result, cases []string) {
	t.Helper()
	if want := len(cases) * len(procfs.Variants.Names()); len(res) != want {
		t.Fatalf("%d results, want %d", len(res), want)
	}
}

// Both model walks keep the promise: duplicates allowed, never a gap, the
// query finds the old or the new VMA. Each case must have seen the change.
func TestModelWalksNeverTear(t *testing.T) {
	o := &Options{Cases: Cases, File: "maps", Reads: 3000}
	res := runModel(t, o, procfs.Variants.Names()...)
	wantEach(t, res, Cases)
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

// runSimModel runs the check of o on seed 003's machine, simulated, with
// variants.
func runSimModel(t *testing.T, o *Options, variants ...string) []Result {
	t.Helper()
	return runIn(t, o, experiment.Env{Target: experiment.Sim, Machine: machine.MustNamed("virtme-ng-4"), Variants: variants,
		Sim: &experiment.SimRun{Seed: 1, Until: time.Minute}})
}

// On a simulated machine the reader and the modifier interleave on two
// virtual CPUs: every case sees the change, neither walk ever misses the
// range mapped throughout, and the per-VMA walk reports a VMA twice, as
// allowed (its old form at the end of one chunk, its new one at the start
// of the next). The same seed gives
// the same results, to the JSON byte, each naming its machine.
func TestSimWalksInterleave(t *testing.T) {
	o := &Options{Cases: Cases, File: "maps", Reads: 300}
	a := runSimModel(t, o, procfs.Variants.Names()...)
	b := runSimModel(t, o, procfs.Variants.Names()...)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Errorf("two sim runs differ:\n%s\n%s", ja, jb)
	}
	wantEach(t, a, Cases)
	duplicates := 0
	for _, r := range a {
		if r.Target != experiment.Sim || r.Machine != "virtme-ng-4" {
			t.Errorf("%s %s: target %s, machine %q", r.Variant, r.Case, r.Target, r.Machine)
		}
		if r.Failed() {
			t.Errorf("%s %s: torn: %+v", r.Variant, r.Case, r)
		}
		if r.Reads != o.Reads || r.Modified == 0 || r.Modified == r.Reads {
			t.Errorf("%s %s: %d of %d reads saw the change: the modifier and the reader did not interleave", r.Variant, r.Case, r.Modified, r.Reads)
		}
		if r.Variant == procfs.After.String() {
			duplicates += r.Duplicates
		}
	}
	if duplicates == 0 {
		t.Error("the per-VMA walk never reported a VMA twice")
	}
}

// A sim case bounded by --duration alone ends in virtual time.
func TestSimDurationIsVirtual(t *testing.T) {
	o := &Options{Cases: []string{"split"}, File: "maps", Duration: experiment.Duration(time.Millisecond)}
	res := runSimModel(t, o, procfs.After.String())
	if len(res) != 1 || res[0].Reads == 0 || res[0].Failed() {
		t.Fatalf("%+v", res)
	}
}
