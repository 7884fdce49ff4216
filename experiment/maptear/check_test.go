package maptear

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

const P = 4096

// The boundary VMA A=[a, a+3P) (rw-p) followed by B=[a+3P, a+6P) (r--p),
// then C.
var (
	a      = uint64(0x200000000)
	rw     = Span{a, a + 3*P, 3}
	bNext  = Span{a + 3*P, a + 6*P, 1}
	cAfter = Span{a + 6*P, a + 9*P, 3}
	head   = Span{a, a + P, 7}         // split: the first page, now also executable
	tail   = Span{a + P, a + 3*P, 3}   // split: the rest of A
	shrunk = Span{a, a + P, 3}         // resize: A shrunk to one page
	moved  = Span{a + P, a + 2*P, 1}   // remap: B's last page in A's middle
	aHead  = Span{a, a + P, 3}         // remap: the part of A before it
	none   = Span{}                    // a query that found nothing
	wrong  = Span{a + 2*P, a + 3*P, 3} // a VMA no case accepts for the query
	moreA  = Span{a, a + 4*P, 3}       // A grown: not a form it takes
)

// checker returns the Checker of case name as its calibration sets it.
func checker(name string) Checker {
	c := Checker{Case: name, Page: P, Last: rw, First: bNext, Mapped: Span{Start: rw.Start, End: bNext.End}}
	switch name {
	case "split":
		c.LastModified, c.FirstModified = head, tail
	case "resize":
		c.LastModified, c.FirstModified = shrunk, bNext
		c.Hole = Span{Start: a + P, End: a + 3*P}
	case "remap":
		c.LastModified, c.FirstModified = aHead, moved
	}
	return c
}

// The lines are judged as a pair, as proc-maps-race.c does; split's lines
// change in unison.
func TestCheckerPairs(t *testing.T) {
	for _, c := range []struct {
		name        string
		last, first Span
		want        Result
		title       string
	}{
		{"split", rw, bNext, Result{}, ""},
		{"split", head, tail, Result{Modified: 1}, ""},
		{"split", head, rw, Result{Modified: 1, Duplicates: 1}, ""}, // resumed inside a restored A
		{"split", rw, tail, Result{Unexpected: 1, Unison: 1, Duplicates: 1}, "split restore result invalid"},
		{"split", rw, cAfter, Result{Gaps: 1, Unexpected: 1, Unison: 1}, "a mapped range is missing"},
		{"split", head, bNext, Result{Modified: 1, Gaps: 1, Unexpected: 1, Unison: 1}, "a mapped range is missing"},
		{"split", moreA, bNext, Result{Unexpected: 1, Unison: 1, Duplicates: 1}, "split restore result invalid"},
		{"resize", shrunk, bNext, Result{Modified: 1}, ""}, // the hole is no gap
		{"resize", shrunk, rw, Result{Modified: 1, Duplicates: 1}, ""},
		{"resize", shrunk, cAfter, Result{Modified: 1, Gaps: 1, Unexpected: 1}, "a mapped range is missing"},
		{"resize", rw, cAfter, Result{Gaps: 1, Unexpected: 1}, "a mapped range is missing"},
		{"remap", aHead, moved, Result{Modified: 1}, ""},
		{"remap", aHead, rw, Result{Modified: 1, Duplicates: 1}, ""},
		{"remap", aHead, bNext, Result{Modified: 1, Gaps: 1, Unexpected: 1}, "a mapped range is missing"},
		{"remap", rw, moved, Result{Unexpected: 1, Duplicates: 1}, "remap restore result invalid"},
	} {
		ch := checker(c.name)
		var r Result
		title := ch.Observe(&r, Boundary{Last: c.last, First: c.first})
		c.want.Reads = 1
		if r != c.want || title != c.title {
			t.Errorf("%s %x | %x: %+v %q\nwant %+v %q", c.name, c.last, c.first, r, title, c.want, c.title)
		}
		if r.Failed() != (c.title != "") {
			t.Errorf("%s %x | %x: Failed() = %v", c.name, c.last, c.first, r.Failed())
		}
	}
}

// Each case's query check, as proc-maps-race.c has it.
func TestCheckerQueries(t *testing.T) {
	for _, c := range []struct {
		name  string
		v     Span
		found bool
		ok    bool
	}{
		{"split", rw, true, true}, {"split", tail, true, true}, {"split", head, true, false},
		{"split", none, false, false},
		{"resize", rw, true, true}, {"resize", shrunk, true, true}, {"resize", moreA, true, false},
		{"resize", wrong, true, false},
		{"remap", rw, true, true}, {"remap", moved, true, true}, {"remap", wrong, true, false},
		{"remap", aHead, true, false},
	} {
		ch := checker(c.name)
		var r Result
		if ok := ch.ObserveQuery(&r, c.v, c.found); ok != c.ok || r.Queries != 1 || (r.QueryGaps+r.QueryWrong == 0) != c.ok {
			t.Errorf("%s query %x (found %v): ok %v, %+v; want ok %v", c.name, c.v, c.found, ok, r, c.ok)
		}
	}
}

// In the resize case the two pages after the first are unmapped while
// shrunk: a read that goes from [a,+1P) straight to B misses nothing that
// stays mapped, but one that skips B does.
func TestCheckerHole(t *testing.T) {
	c := checker("resize")
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

func TestBoundaryLines(t *testing.T) {
	chunk := []byte("1\n2\n3\n4\n5\n")
	for _, c := range []struct {
		n           int
		last, first string
	}{{0, "", ""}, {1, "5\n", "1\n"}, {3, "3\n4\n5\n", "1\n2\n3\n"}, {9, string(chunk), string(chunk)}} {
		if got := string(LastLines(chunk, c.n)); got != c.last {
			t.Errorf("LastLines(%d) = %q, want %q", c.n, got, c.last)
		}
		if got := string(FirstLines(chunk, c.n)); got != c.first {
			t.Errorf("FirstLines(%d) = %q, want %q", c.n, got, c.first)
		}
	}
	var lines []string
	printBoundary(func(f string, a ...any) { lines = append(lines, strings.TrimSpace(fmt.Sprintf(f, a...))) }, "t",
		Boundary{Before: LastLines(chunk, 2), After: FirstLines(chunk, 2)})
	if want := []string{"t", "4", "5", "-----------------page boundary-----------------", "1", "2"}; !slices.Equal(lines, want) {
		t.Errorf("printed %q, want %q", lines, want)
	}
}
