package maptear

import "testing"

const P = 4096

// The split case around a boundary VMA A=[a, a+3P) (rw-p) followed by
// B=[a+3P, a+6P) (r--p). Modified, A is [a,+1P) ---p then [a+1P,+3P) rw-p.
var (
	a      = uint64(0x200000000)
	rw     = span{a, a + 3*P, 3}
	bNext  = span{a + 3*P, a + 6*P, 1}
	cAfter = span{a + 6*P, a + 9*P, 3}
	head   = span{a, a + P, 0}
	tail   = span{a + P, a + 3*P, 3}
)

func splitChecker() checker {
	return checker{
		lastRestored: rw, lastModified: head,
		firstRestored: bNext, firstModified: tail,
		queryRestored: rw, queryModified: tail,
		mapped: span{Start: rw.Start, End: bNext.End},
	}
}

func TestCheckerCounts(t *testing.T) {
	c := splitChecker()
	var r CaseResult
	c.observe(&r, rw, bNext)   // restored: fine
	c.observe(&r, head, tail)  // modified: fine
	c.observe(&r, head, rw)    // resumed inside a restored A: a duplicate
	c.observe(&r, rw, cAfter)  // skipped B: a gap
	c.observe(&r, head, bNext) // skipped [a+P, a+3P): a gap
	c.observe(&r, rw, span{a + 3*P, a + 4*P, 1})
	want := CaseResult{Reads: 6, Modified: 3, Duplicates: 1, Gaps: 2, Unexpected: 2}
	if r != want {
		t.Errorf("got %+v\nwant %+v", r, want)
	}
	var q CaseResult
	c.observeQuery(&q, rw, true)
	c.observeQuery(&q, tail, true)
	c.observeQuery(&q, head, true)
	c.observeQuery(&q, span{}, false)
	if want := (CaseResult{Queries: 4, QueryGaps: 1, QueryWrong: 1}); q != want {
		t.Errorf("queries: got %+v\nwant %+v", q, want)
	}
	if !r.Failed() || !q.Failed() || (CaseResult{Reads: 1, Duplicates: 1}).Failed() {
		t.Error("Failed() wrong")
	}
}

// In the resize case the two pages after the first are unmapped while
// shrunk: a read that goes from [a,+1P) straight to B misses nothing that
// stays mapped, but one that skips B does.
func TestCheckerHole(t *testing.T) {
	c := splitChecker()
	c.hole = span{Start: a + P, End: a + 3*P}
	if c.skipsMapped(a+P, a+3*P) {
		t.Error("the hole counted as a gap")
	}
	if !c.skipsMapped(a+P, a+4*P) || !c.skipsMapped(a, a+2*P) {
		t.Error("a range beyond the hole not counted as a gap")
	}
	if c.skipsMapped(a+6*P, a+9*P) {
		t.Error("a range outside the watched VMAs counted")
	}
}
