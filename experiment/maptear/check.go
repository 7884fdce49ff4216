package maptear

import (
	"bytes"

	"mmlab/uapi"
)

// Span is a VMA's range and permissions, all that the check compares.
type Span struct {
	Start, End uint64
	Perm       uapi.Perm
}

// SpanOf returns the Span of v.
func SpanOf(v *uapi.VMA) Span { return Span{v.Start, v.End, v.Flags} }

// sameRange reports whether a and b cover the same addresses.
func sameRange(a, b Span) bool { return a.Start == b.Start && a.End == b.End }

// Boundary is one observation of the chunk boundary: the last line of one
// read() and the first line of the next, and, for the verbose report, the
// text around them (Before: the end of the first chunk, After: the start of
// the second), valid until the next observation.
type Boundary struct {
	Last, First   Span
	Before, After []byte
}

// BoundaryLines is how many lines on each side of the boundary a verbose
// report prints (proc-maps-race.c's print_boundaries).
const BoundaryLines = 3

// LastLines returns the last n lines of chunk (whole lines, newline
// included), all of it if it has fewer.
func LastLines(chunk []byte, n int) []byte {
	i := len(chunk) - 1 // the final newline
	for ; n > 0 && i >= 0; n-- {
		i = bytes.LastIndexByte(chunk[:max(i, 0)], '\n')
	}
	return chunk[i+1:]
}

// FirstLines returns the first n lines of chunk, all of it if it has fewer.
func FirstLines(chunk []byte, n int) []byte {
	end := 0
	for ; n > 0 && end < len(chunk); n-- {
		i := bytes.IndexByte(chunk[end:], '\n')
		if i < 0 {
			return chunk
		}
		end += i + 1
	}
	return chunk[:end]
}

// Checker judges the observations of one case, on either target, with the
// checks of proc-maps-race.c. It knows, from the calibration with the
// modifier stopped, the original (restored) and the modified form of the two
// boundary lines, and the range that stays mapped throughout.
type Checker struct {
	Case string // one of Cases
	Page uint64
	// The boundary lines: original (as restored) and modified.
	Last, First                 Span
	LastModified, FirstModified Span
	// Mapped is [Last.Start, First.End), less Hole (empty when the case
	// never unmaps anything; in resize, the two pages the shrink unmaps).
	Mapped, Hole Span
}

// The titles of the failed checks, as proc-maps-race.c prints them.
const (
	titleModified = "result invalid" // the lines do not pair as the modified form
	titleRestored = "restore result invalid"
	titleUnison   = "lines did not change in unison"
	titleGap      = "a mapped range is missing"
)

// Observe counts one read and returns the title of the first check it
// failed, "" if none. The lines are judged as a pair, as proc-maps-race.c
// does: if the last line is the modified one, the first must be the
// modified one too, or the restored boundary VMA reported again after the
// resume (a duplicate); otherwise both must be the original lines. In split
// both lines must change, or neither ("changed in unison").
func (c *Checker) Observe(r *Result, b Boundary) (failed string) {
	r.Reads++
	fail := func(counter *int, title string) {
		*counter++
		if failed == "" {
			failed = title
		}
	}
	if b.First.Start < b.Last.End {
		r.Duplicates++
	}
	if c.skipsMapped(b.Last.End, b.First.Start) {
		fail(&r.Gaps, titleGap)
	}
	if b.Last == c.LastModified {
		r.Modified++
		if b.First != c.FirstModified && b.First != c.Last {
			fail(&r.Unexpected, c.Case+" "+titleModified)
		}
	} else if b.Last != c.Last || b.First != c.First {
		fail(&r.Unexpected, c.Case+" "+titleRestored)
	}
	if c.Case == "split" && (b.Last != c.Last) != (b.First != c.First) {
		fail(&r.Unison, titleUnison)
	}
	return failed
}

// ObserveQuery counts one PROCMAP_QUERY of the changing address (found is
// false when the kernel answered ENOENT) and reports whether it passed
// proc-maps-race.c's check of the case: split, the original VMA or the
// first line of the split; resize, the VMA at the same start, of three
// pages or one; remap, the original VMA or the page remapped into it.
func (c *Checker) ObserveQuery(r *Result, v Span, found bool) bool {
	r.Queries++
	if !found {
		r.QueryGaps++
		return false
	}
	var ok bool
	switch size := v.End - v.Start; c.Case {
	case "split":
		ok = sameRange(v, c.Last) || sameRange(v, c.FirstModified)
	case "resize":
		ok = v.Start == c.Last.Start && (size == PiecePages*c.Page || size == c.Page)
	case "remap":
		ok = v.Start == c.Last.Start && size == PiecePages*c.Page || v.Start == c.Last.Start+c.Page && size == c.Page
	}
	if !ok {
		r.QueryWrong++
	}
	return ok
}

// skipsMapped reports whether [from, to), the addresses between two
// consecutive lines, holds an address that stays mapped throughout.
func (c *Checker) skipsMapped(from, to uint64) bool {
	from, to = max(from, c.Mapped.Start), min(to, c.Mapped.End)
	if from >= to {
		return false
	}
	// [from, to) minus the hole is empty only if the hole covers it.
	return !(c.Hole.Start <= from && to <= c.Hole.End)
}
