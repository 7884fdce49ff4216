package maptear

import "testing"

const P = 4096

// The split case around a boundary VMA A=[a, a+3P) (rw-p) followed by
// B=[a+3P, a+6P) (r--p). Modified, A is [a,+1P) ---p then [a+1P,+3P) rw-p.
var (
	a      = uint64(0x200000000)
	rw     = Span{a, a + 3*P, 3}
	bNext  = Span{a + 3*P, a + 6*P, 1}
	cAfter = Span{a + 6*P, a + 9*P, 3}
	head   = Span{a, a + P, 0}
	tail   = Span{a + P, a + 3*P, 3}
)

func splitChecker() Checker {
	return Checker{
		LastRestored: rw, LastModified: head,
		FirstRestored: bNext, FirstModified: tail,
		QueryRestored: rw, QueryModified: tail,
		Mapped: Span{Start: rw.Start, End: bNext.End},
	}
}

func TestCheckerCounts(t *testing.T) {
	c := splitChecker()
	var r Result
	c.Observe(&r, rw, bNext)   // restored: fine
	c.Observe(&r, head, tail)  // modified: fine
	c.Observe(&r, head, rw)    // resumed inside a restored A: a duplicate
	c.Observe(&r, rw, cAfter)  // skipped B: a gap
	c.Observe(&r, head, bNext) // skipped [a+P, a+3P): a gap
	c.Observe(&r, rw, Span{a + 3*P, a + 4*P, 1})
	want := Result{Reads: 6, Modified: 3, Duplicates: 1, Gaps: 2, Unexpected: 2}
	if r != want {
		t.Errorf("got %+v\nwant %+v", r, want)
	}
	var q Result
	c.ObserveQuery(&q, rw, true)
	c.ObserveQuery(&q, tail, true)
	c.ObserveQuery(&q, head, true)
	c.ObserveQuery(&q, Span{}, false)
	if want := (Result{Queries: 4, QueryGaps: 1, QueryWrong: 1}); q != want {
		t.Errorf("queries: got %+v\nwant %+v", q, want)
	}
	if !r.Failed() || !q.Failed() || (Result{Reads: 1, Duplicates: 1}).Failed() {
		t.Error("Failed() wrong")
	}
}

// In the resize case the two pages after the first are unmapped while
// shrunk: a read that goes from [a,+1P) straight to B misses nothing that
// stays mapped, but one that skips B does.
func TestCheckerHole(t *testing.T) {
	c := splitChecker()
	c.Hole = Span{Start: a + P, End: a + 3*P}
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
