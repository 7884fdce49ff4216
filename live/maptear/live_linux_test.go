package maptear

import (
	"context"
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"mmlab/experiment"
	"mmlab/experiment/maptear"
	"mmlab/live"
)

// TestMain lets the test binary run the child role when Run re-executes it.
func TestMain(m *testing.M) { live.RunTests(m) }

// run runs the live check with o, returning what it emitted.
func run(ctx context.Context, o *maptear.Options) ([]maptear.Result, error) {
	var res []maptear.Result
	err := Run(ctx, o, experiment.Env{}, func(r maptear.Result) { res = append(res, r) })
	return res, err
}

// The live kernel keeps the promise: in every case, reads may see
// duplicates but never a gap, never a line that is neither the old nor the
// new form, and PROCMAP_QUERY always finds the old or the new VMA.
func TestLiveNoGaps(t *testing.T) {
	for _, c := range []struct {
		name string
		o    maptear.Options
	}{
		{"maps", maptear.Options{File: "maps"}},
		{"maps/pinned", maptear.Options{File: "maps", Pin: true}},
		{"smaps", maptear.Options{File: "smaps"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := c.o
			o.Cases, o.Reads = maptear.Cases, 3000
			testLiveNoGaps(t, &o)
		})
	}
}

func testLiveNoGaps(t *testing.T, o *maptear.Options) {
	res, err := run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(maptear.Cases) {
		t.Fatalf("%d results, want %d", len(res), len(maptear.Cases))
	}
	for _, r := range res {
		t.Logf("%+v", r)
		if r.Reads != 3000 || r.Queries != 3000 {
			t.Errorf("%s: %d reads, %d queries, want 3000", r.Case, r.Reads, r.Queries)
		}
		if r.Failed() {
			t.Errorf("%s: the kernel broke the promise: %+v", r.Case, r)
		}
		if r.Target != experiment.Live || r.Variant != experiment.VariantKernel || r.File != o.File {
			t.Errorf("%s: row %+v, file %s", r.Case, r.Row, r.File)
		}
	}
}

// A reader that skips the VMA after the boundary (the test hook) is caught
// by each check. In split and remap every read then misses a range that
// stays Mapped: the line dropped is the second piece of the boundary VMA,
// its restored form (then the next VMA follows a line that ends at a+1P) or
// the next VMA. In resize it is not always a gap: dropping the restored
// [a,+3P) after the shrunk [a,+1P) skips only the unmapped part, so the gap
// check leaves that case out; the pairing of the two lines catches it. In
// split the two lines then do not change in unison.
func TestLiveCatchesSkippedVMA(t *testing.T) {
	defer setHooks(true, nil)()
	res, err := run(context.Background(), &maptear.Options{Cases: maptear.Cases, File: "maps", Reads: 200})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		t.Logf("%+v", r)
		// A read whose second chunk starts with the boundary VMA reported
		// again (a duplicate) drops that line, not a mapped range: no gap.
		// Duplicates are rare, so nearly every read must show the gap.
		if r.Case != "resize" && (r.Gaps == 0 || r.Gaps < r.Reads*9/10) {
			t.Errorf("%s: %d gaps in %d reads, want (nearly) every read", r.Case, r.Gaps, r.Reads)
		}
		// In resize a dropped restored [a,+3P) after the shrunk [a,+1P)
		// leaves the shrunk form's pair (the next VMA): only the other
		// reads pair wrong, most of them.
		want := r.Reads * 9 / 10
		if r.Case == "resize" {
			want = r.Reads / 2
		}
		if r.Unexpected < want {
			t.Errorf("%s: %d reads paired wrong in %d, want %d or more", r.Case, r.Unexpected, r.Reads, want)
		}
		if r.Case == "split" && r.Unison == 0 {
			t.Errorf("split: no read whose lines did not change in unison: %+v", r)
		}
	}
}

// Cancelled in the middle of a case's free run, Run stops, emits the case
// so far, returns why, and leaves no child behind.
func TestRunLiveCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	defer setHooks(false, func() {
		if n++; n == 100 {
			cancel()
		}
	})()
	res, err := run(ctx, &maptear.Options{Cases: maptear.Cases, File: "maps", Reads: 1 << 30})
	if !errors.Is(err, context.Canceled) || len(res) != 1 || res[0].Reads != 100 {
		t.Fatalf("%+v, %v", res, err)
	}
	// Every child of this process has been reaped.
	var ru unix.Rusage
	if pid, err := unix.Wait4(-1, nil, unix.WNOHANG, &ru); !errors.Is(err, unix.ECHILD) {
		t.Errorf("a child is left: wait4 = %d, %v", pid, err)
	}
}
