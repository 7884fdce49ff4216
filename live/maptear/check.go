package maptear

import "mmlab/live/procmaps"

// span is a VMA's range and permissions, all that the check compares.
type span struct {
	Start, End uint64
	Perm       procmaps.Perm
}

func spanOf(v *procmaps.VMA) span { return span{v.Start, v.End, v.Flags} }

// checker judges observations of one case. It knows, from the calibration
// with the child stopped, the restored (original) and the modified form of
// the two boundary lines and of the VMA covering the changing address, and
// the range that stays mapped throughout.
type checker struct {
	lastRestored, lastModified   span // the last line of the first chunk
	firstRestored, firstModified span // the first line of the second chunk
	queryRestored, queryModified span // the VMA covering the changing address
	// mapped is [lastRestored.Start, firstRestored.End), less hole (an empty
	// hole when the case never unmaps anything).
	mapped, hole span
}

// observe counts one read: last and first are the lines on either side of
// the chunk boundary.
func (c *checker) observe(r *CaseResult, last, first span) {
	r.Reads++
	if last == c.lastModified {
		r.Modified++
	}
	if first.Start < last.End {
		r.Duplicates++
	}
	if c.skipsMapped(last.End, first.Start) {
		r.Gaps++
	}
	okLast := last == c.lastRestored || last == c.lastModified
	// The first line of the second chunk may also be the restored form of
	// the boundary VMA, re-reported after the resume: a duplicate.
	okFirst := first == c.firstRestored || first == c.firstModified || first == c.lastRestored
	if !okLast || !okFirst {
		r.Unexpected++
	}
}

// observeQuery counts one PROCMAP_QUERY of the changing address: found is
// false when the kernel answered ENOENT.
func (c *checker) observeQuery(r *CaseResult, v span, found bool) {
	r.Queries++
	switch {
	case !found:
		r.QueryGaps++
	case v != c.queryRestored && v != c.queryModified:
		r.QueryWrong++
	}
}

// skipsMapped reports whether [from, to), the addresses between two
// consecutive lines, holds an address that stays mapped throughout.
func (c *checker) skipsMapped(from, to uint64) bool {
	from, to = max(from, c.mapped.Start), min(to, c.mapped.End)
	if from >= to {
		return false
	}
	// [from, to) minus the hole is empty only if the hole covers it.
	return !(c.hole.Start <= from && to <= c.hole.End)
}
