package maptear

import (
	"context"
	"slices"
	"strings"
	"testing"

	"mmlab/experiment/maptear"
	"mmlab/explore"
	"mmlab/live/livetest"
)

// gapReads bounds each gap case of the live tests (with gapDuration).
const gapReads = 3000

// measureGap runs the gap cases on the live kernel, one result per layout.
func measureGap(t *testing.T) map[string]maptear.Result {
	t.Helper()
	res, err := run(context.Background(), &maptear.Options{Cases: maptear.GapCases, File: "maps", Reads: gapReads})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(maptear.GapCases) {
		t.Fatalf("%d results, want %d", len(res), len(maptear.GapCases))
	}
	byLayout := map[string]maptear.Result{}
	for _, r := range res {
		byLayout[strings.TrimPrefix(r.Case, "gap-")] = r
	}
	line, failed := maptear.Verdict(&maptear.Options{}, res)
	t.Log(line)
	if failed {
		t.Errorf("the verdict fails: %s", line)
	}
	return byLayout
}

// The live kernel in the layouts of the mremap gap: no gap where the table
// has none (merged, MAP_FIXED, no modifier), and every query answer covers
// the destination; where the table has one, the counts are logged, and a
// kernel that shows none (fixed, or 6.16 and earlier for the text) is
// reported so, not failed.
func TestLiveGapLayouts(t *testing.T) {
	for name, r := range measureGap(t) {
		t.Logf("%s: %d of %d text reads missed the destination, %d of %d queries ENOENT", name, r.Gaps, r.Reads, r.QueryGaps, r.Queries)
		if r.Failed() {
			t.Errorf("%s: %s: %+v", name, r.Judgement(), r)
		}
		if r.Reads != gapReads || r.Queries != gapReads {
			t.Errorf("%s: %d reads, %d queries, want %d", name, r.Reads, r.Queries, gapReads)
		}
		if l := explore.LookupGapLayout(name); (l.TextGap || l.QueryGap) && r.Gaps+r.QueryGaps == 0 {
			t.Logf("%s: this kernel did not show the gap in %d reads", name, r.Reads)
		}
	}
}

// The C reproducer (docs/repro/mremap-gap.c) agrees with the measurement:
// it exits 0 in the layouts where no kernel shows a gap; it exits 1 in the
// far layout (its default) if the measurement saw the gap there, and exits
// 1 in a layout only if the measurement saw the gap somewhere (a kernel
// without it has no layout that shows it). Each run is bounded by the
// program's -t (a layout with the gap ends at its first one); only the exit
// codes are judged.
func TestReproducerAgrees(t *testing.T) {
	if testing.Short() {
		t.Skip("live races of some seconds")
	}
	bin := livetest.BuildC(t, "../../docs/repro/mremap-gap.c", "-O2", "-Wall", "-pthread")
	measured := measureGap(t)
	exposes := slices.ContainsFunc(maptear.GapCases, func(c string) bool {
		r := measured[strings.TrimPrefix(c, "gap-")]
		return r.Gaps+r.QueryGaps > 0
	})
	for _, l := range explore.GapLayouts {
		out, code := livetest.Run(t, bin, "-l", l.Name, "-t", "5")
		t.Logf("-l %s: exit %d\n%s", l.Name, code, out)
		r := measured[l.Name]
		switch {
		case code == 2:
			t.Skipf("the reproducer cannot run here: %s", out)
		case !l.TextGap && !l.QueryGap && code != 0:
			t.Errorf("-l %s: exit %d, want 0: no kernel shows a gap here", l.Name, code)
		case code == 1 && !exposes:
			t.Errorf("-l %s: exit 1, but the measurement saw no gap in any layout", l.Name)
		case l.Name == "far" && r.Gaps+r.QueryGaps > 0 && code != 1:
			t.Errorf("-l far: exit %d, but the measurement saw %d text and %d query gaps there", code, r.Gaps, r.QueryGaps)
		}
	}
}
