package maptear

import (
	"context"
	"testing"

	"mmlab/live/maptear"
	"mmlab/procfs"
)

var opts = maptear.Options{Reads: 3000}

// Both model walks keep the promise: duplicates allowed, never a gap, the
// query finds the old or the new VMA. Each case must have seen the change.
func TestModelWalksNeverTear(t *testing.T) {
	for _, v := range []procfs.Variant{procfs.Before, procfs.After} {
		res, err := run(context.Background(), v, opts, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			t.Logf("%s %+v", v, r)
			if r.Failed() {
				t.Errorf("%s %s: torn: %+v", v, r.Case, r)
			}
			if r.Reads != opts.Reads || r.Modified == 0 {
				t.Errorf("%s %s: %d reads, %d saw the change: the race did not run", v, r.Case, r.Reads, r.Modified)
			}
		}
	}
}

// With the after walk made to skip a VMA, the checker reports gaps in the
// text and in the query: the check can fail.
func TestCheckerCatchesSkippedVMA(t *testing.T) {
	res, err := run(context.Background(), procfs.After, maptear.Options{Reads: 200}, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Gaps == 0 || r.QueryGaps == 0 {
			t.Errorf("%s: a walk that skips a VMA went unnoticed: %+v", r.Case, r)
		}
	}
}
