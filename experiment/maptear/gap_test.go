package maptear

import (
	"strings"
	"testing"

	"mmlab/experiment"
	"mmlab/procfs"
)

// TextMiss finds the first address of a range no line covers, and 0 when
// the lines cover it, whatever lies around it.
func TestTextMiss(t *testing.T) {
	text := []byte("00400000-00401000 r-xp 00000000 00:00 0 \n" +
		"10000000-10001000 rw-p 00000000 00:00 0 \n" +
		"10002000-10003000 r--p 00000000 00:00 0 \n" +
		"20000000-20001000 rw-p 00000000 00:00 0 \n")
	for _, c := range []struct{ lo, hi, want uint64 }{
		{0x10000000, 0x10001000, 0},
		{0x10000000, 0x10003000, 0x10001000},
		{0x10002000, 0x10003000, 0},
		{0x10003000, 0x10004000, 0x10003000},
		{0x30000000, 0x30001000, 0x30000000},
	} {
		if got := TextMiss(text, c.lo, c.hi); got != c.want {
			t.Errorf("TextMiss(%#x, %#x) = %#x, want %#x", c.lo, c.hi, got, c.want)
		}
	}
}

// A gap is a measurement where v6.19 shows it (far and adjacent: text and
// query; split: query), a failure anywhere else: the other layouts, the
// model's before design, a query answer that does not cover the address.
func TestGapJudgement(t *testing.T) {
	live := experiment.LiveRow
	before := experiment.Row{Target: experiment.Model, Variant: "before"}
	for _, c := range []struct {
		r    Result
		want string
	}{
		{Result{Row: live, Case: "gap-far", Reads: 10, Gaps: 2, Queries: 10, QueryGaps: 3}, "gap"},
		{Result{Row: live, Case: "gap-split", Reads: 10, Queries: 10, QueryGaps: 1}, "gap"},
		{Result{Row: live, Case: "gap-split", Reads: 10, Gaps: 1, Queries: 10}, "TORN"},
		{Result{Row: live, Case: "gap-merged", Reads: 10, Queries: 10, QueryGaps: 1}, "TORN"},
		{Result{Row: live, Case: "gap-fixed", Reads: 10, Gaps: 1, Queries: 10}, "TORN"},
		{Result{Row: live, Case: "gap-far", Reads: 10, Queries: 10, QueryWrong: 1}, "TORN"},
		{Result{Row: before, Case: "gap-far", Reads: 10, Gaps: 1, Queries: 10}, "TORN"},
		{Result{Row: live, Case: "gap-none", Reads: 10, Queries: 10}, "ok"},
	} {
		if got := c.r.Judgement(); got != c.want {
			t.Errorf("%s %s %+v: %s, want %s", c.r.Target, c.r.Case, c.r, got, c.want)
		}
	}
	rs := []Result{{Row: live, Case: "gap-far", Reads: 100, Gaps: 10, Queries: 100, QueryGaps: 20},
		{Row: live, Case: "gap-split", Reads: 100, Gaps: 0, Queries: 100, QueryGaps: 0},
		{Row: live, Case: "gap-merged", Reads: 100, Queries: 100}}
	want := "this kernel exposes a gap during mremap onto a mapped range: 10.0% (20 of 200) of queries, 10.0% (10 of 100) of text reads"
	if got := GapLine(rs, experiment.Live); got != want {
		t.Errorf("GapLine = %q, want %q", got, want)
	}
	rs[0].Gaps, rs[0].QueryGaps = 0, 0
	if got := GapLine(rs, experiment.Live); !strings.HasPrefix(got, "this kernel does not expose a gap") {
		t.Errorf("GapLine of no gap = %q", got)
	}
	if line, failed := Verdict(&Options{}, rs); failed || !strings.Contains(line, "does not expose") {
		t.Errorf("Verdict = %q, %v", line, failed)
	}
}

// On the model, in real time (a modifier goroutine against the reader),
// the before design never shows the gap, nor does the after design where
// the table says none; where it says gap, the after design's counts are
// logged (a race: not asserted).
func TestModelGapLayouts(t *testing.T) {
	o := &Options{Cases: GapCases, File: "maps", Reads: 2000}
	res := runModel(t, o, procfs.Variants.Names()...)
	wantEach(t, res, GapCases)
	for _, r := range res {
		t.Logf("%s %s: %d of %d text reads missed, %d of %d queries ENOENT", r.Variant, r.Case, r.Gaps, r.Reads, r.QueryGaps, r.Queries)
		if r.Failed() {
			t.Errorf("%s %s: %s: %+v", r.Variant, r.Case, r.Judgement(), r)
		}
		if r.Reads != o.Reads || r.Queries != o.Reads {
			t.Errorf("%s %s: %d reads, %d queries, want %d", r.Variant, r.Case, r.Reads, r.Queries, o.Reads)
		}
	}
	line, failed := Verdict(o, res)
	t.Log(line)
	if failed {
		t.Errorf("verdict %q", line)
	}
}

// The gap cases read maps, and are named by their layouts.
func TestGapOptions(t *testing.T) {
	o := NewOptions()
	o.Cases = []string{"gap-far"}
	if err := o.Validate(); err != nil {
		t.Errorf("gap-far: %v", err)
	}
	o.File = "smaps"
	if err := o.Validate(); err == nil {
		t.Error("gap-far with smaps was accepted")
	}
	if err := experiment.ParseOptions(NewOptions(), "--cases", "gap-nowhere"); err == nil {
		t.Error("gap-nowhere was accepted")
	}
}
