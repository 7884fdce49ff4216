package maptear

import "mmlab/uapi"

// Span is a VMA's range and permissions, all that the check compares.
type Span struct {
	Start, End uint64
	Perm       uapi.Perm
}

// SpanOf returns the Span of v.
func SpanOf(v *uapi.VMA) Span { return Span{v.Start, v.End, v.Flags} }

// Checker judges the observations of one case, on either target: one
// definition of a duplicate and a gap. It knows, from the calibration with
// the modifier stopped, the restored (original) and the modified form of the
// two boundary lines and of the VMA covering the changing address, and the
// range that stays mapped throughout.
type Checker struct {
	LastRestored, LastModified   Span // the last line of the first chunk
	FirstRestored, FirstModified Span // the first line of the second chunk
	QueryRestored, QueryModified Span // the VMA covering the changing address
	// Mapped is [LastRestored.Start, FirstRestored.End), less Hole (empty
	// when the case never unmaps anything; in resize, the two pages the
	// shrink unmaps).
	Mapped, Hole Span
}

// Observe counts one read: last and first are the lines on either side of
// the chunk boundary.
func (c *Checker) Observe(r *Result, last, first Span) {
	r.Reads++
	if last == c.LastModified {
		r.Modified++
	}
	if first.Start < last.End {
		r.Duplicates++
	}
	if c.skipsMapped(last.End, first.Start) {
		r.Gaps++
	}
	okLast := last == c.LastRestored || last == c.LastModified
	// The first line of the second chunk may also be the restored form of
	// the boundary VMA, re-reported after the resume: a duplicate.
	okFirst := first == c.FirstRestored || first == c.FirstModified || first == c.LastRestored
	if !okLast || !okFirst {
		r.Unexpected++
	}
}

// ObserveQuery counts one PROCMAP_QUERY of the changing address: found is
// false when the kernel answered ENOENT.
func (c *Checker) ObserveQuery(r *Result, v Span, found bool) {
	r.Queries++
	switch {
	case !found:
		r.QueryGaps++
	case v != c.QueryRestored && v != c.QueryModified:
		r.QueryWrong++
	}
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
