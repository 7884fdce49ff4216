package maptear

import (
	"context"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// The live kernel keeps the promise: in every case, reads may see
// duplicates but never a gap, never a line that is neither the old nor the
// new form, and PROCMAP_QUERY always finds the old or the new VMA.
func TestLiveNoGaps(t *testing.T) {
	for _, c := range []struct {
		name string
		o    Options
	}{
		{"maps", Options{Reads: 3000}},
		{"maps/pinned", Options{Reads: 3000, Pin: true}},
		{"smaps", Options{Reads: 3000, File: "smaps"}},
	} {
		t.Run(c.name, func(t *testing.T) { testLiveNoGaps(t, c.o) })
	}
}

func testLiveNoGaps(t *testing.T, o Options) {
	res, err := RunLive(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(Cases) {
		t.Fatalf("%d results, want %d", len(res), len(Cases))
	}
	for _, r := range res {
		t.Logf("%+v", r)
		if r.Reads != 3000 || r.Queries != 3000 {
			t.Errorf("%s: %d reads, %d queries, want 3000", r.Case, r.Reads, r.Queries)
		}
		if r.Failed() {
			t.Errorf("%s: the kernel broke the promise: %+v", r.Case, r)
		}
	}
}

// A reader that skips the VMA after the boundary (the test hook) is caught.
// In split and remap every read then misses a range that stays Mapped: the
// line dropped is the second piece of the boundary VMA, its restored form
// (then the next VMA follows a line that ends at a+1P) or the next VMA. In
// resize it is not always a gap: dropping the restored [a,+3P) after the
// shrunk [a,+1P) skips only the unmapped part, so that case is left out.
func TestLiveCatchesSkippedVMA(t *testing.T) {
	res, err := RunLive(context.Background(), Options{Cases: []string{"split", "remap"}, Reads: 200, dropNext: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		t.Logf("%+v", r)
		// A read whose second chunk starts with the boundary VMA reported
		// again (a duplicate) drops that line, not a mapped range: no gap.
		// Duplicates are rare, so nearly every read must show the gap.
		if r.Gaps == 0 || r.Gaps < r.Reads*9/10 {
			t.Errorf("%s: %d gaps in %d reads, want (nearly) every read", r.Case, r.Gaps, r.Reads)
		}
	}
}

func TestRunLiveBadOptions(t *testing.T) {
	for _, o := range []Options{{Cases: []string{"nope"}}, {File: "status"}} {
		if _, err := RunLive(context.Background(), o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// Cancelled in the middle of a case's free run, RunLive stops, returns the
// case so far and why, and leaves no child behind.
func TestRunLiveCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	res, err := RunLive(ctx, Options{Reads: 1 << 30, afterRead: func() {
		if n++; n == 100 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) || len(res) != 1 || res[0].Reads != 100 {
		t.Fatalf("%+v, %v", res, err)
	}
	// Every child of this process has been reaped.
	var ru unix.Rusage
	if pid, err := unix.Wait4(-1, nil, unix.WNOHANG, &ru); !errors.Is(err, unix.ECHILD) {
		t.Errorf("a child is left: wait4 = %d, %v", pid, err)
	}
}
