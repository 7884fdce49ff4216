package mm

import "mmlab/mm/pgtable"

// vmaMerge mirrors struct vma_merge_struct: a proposed range with its
// attributes, and the VMAs around it.
type vmaMerge struct {
	prev, middle, next *VMA
	start, end, pgoff  uint64
	flags              VMFlags
	file               *File
	anonVMA            *AnonVMA
	name               string
	// copiedFrom is the VMA mremap copies (vma_merge_copied_range).
	copiedFrom *VMA
	// justExpand: only prev may be expanded (vma_merge_extend).
	justExpand bool
	// skipUprobe: do not call the MmapFile hook (copy_vma).
	skipUprobe bool
}

// isMergeableVMA mirrors mm/vma.c:is_mergeable_vma().
func (g *vmaMerge) isMergeableVMA(tgt *VMA) bool {
	return (tgt.Flags^g.flags)&^VM_IGNORE_MERGE == 0 && tgt.File == g.file && tgt.Name == g.name
}

// isMergeableAnonVMA mirrors mm/vma.c:is_mergeable_anon_vma().
func (g *vmaMerge) isMergeableAnonVMA(tgt *VMA) bool {
	tgtAnon, srcAnon := tgt.AnonVMA, g.anonVMA
	switch {
	case tgtAnon == nil && srcAnon != nil:
		// Case 1: dup_anon_vma() from src into tgt.
		return !g.middle.IsForkChild() && !g.copiedFrom.IsForkChild()
	case tgtAnon != nil && srcAnon == nil:
		// Case 2: use tgt's anon_vma.
		return !tgt.IsForkChild()
	}
	// Case 3: already shared (or both nil).
	return srcAnon == tgtAnon
}

// canMergeBefore mirrors can_vma_merge_before(): the range may merge in
// front of next.
func (g *vmaMerge) canMergeBefore() bool {
	pglen := (g.end - g.start) >> pgtable.PageShift
	return g.isMergeableVMA(g.next) && g.isMergeableAnonVMA(g.next) && g.next.Pgoff == g.pgoff+pglen
}

// canMergeAfter mirrors can_vma_merge_after(): the range may merge behind prev.
func (g *vmaMerge) canMergeAfter() bool {
	return g.isMergeableVMA(g.prev) && g.isMergeableAnonVMA(g.prev) && g.prev.Pgoff+g.prev.Pages() == g.pgoff
}

// canMergeLeft mirrors can_vma_merge_left().
func (g *vmaMerge) canMergeLeft() bool {
	return g.prev != nil && g.prev.End == g.start && g.canMergeAfter()
}

// canMergeRight mirrors can_vma_merge_right(): when merging both ways, prev's
// and next's anon_vmas must also be compatible with each other.
func (g *vmaMerge) canMergeRight(canMergeLeft bool) bool {
	if g.next == nil || g.end != g.next.Start || !g.canMergeBefore() {
		return false
	}
	if !canMergeLeft {
		return true
	}
	return g.prev.AnonVMA == nil || g.next.AnonVMA == nil || g.prev.AnonVMA == g.next.AnonVMA
}

// mergeNewRange mirrors mm/vma.c:vma_merge_new_range(): expand prev and/or
// next over the new range [g.start, g.end). Returns the expanded VMA or nil.
func (m *MM) mergeNewRange(g *vmaMerge) *VMA {
	if g.flags&VM_SPECIAL != 0 || (g.prev == nil && g.next == nil) {
		return nil
	}
	left := g.canMergeLeft()
	right := !g.justExpand && g.canMergeRight(left)
	var target *VMA
	if right {
		g.end = g.next.End
		target = g.next
	}
	if left {
		g.start = g.prev.Start
		g.pgoff = g.prev.Pgoff
		target = g.prev
	}
	if target == nil {
		return nil
	}
	m.vmaExpand(g, target)
	return target
}

// vmaExpand mirrors mm/vma.c:vma_expand(): target grows to [g.start, g.end),
// swallowing g.next if the range ends where next ends.
func (m *MM) vmaExpand(g *vmaMerge, target *VMA) {
	next := g.next
	removeNext := next != nil && target != next && g.end == next.End
	if removeNext {
		dupAnonVMA(target, next)
	}
	if g.copiedFrom != nil {
		dupAnonVMA(target, g.copiedFrom)
	}
	var remove []*VMA
	if removeNext {
		remove = append(remove, next)
	}
	m.commitMerge(target, g.start, g.end, g.pgoff, remove, nil, 0, 0, g.skipUprobe)
}

// commitMerge mirrors commit_merge() + vma_complete(): erase the removed
// VMAs, give target its new range, move adj's start to adjStart, then link.
func (m *MM) commitMerge(target *VMA, start, end, pgoff uint64, remove []*VMA, adj *VMA, adjStart, adjPgoff uint64, skipUprobe bool) {
	if target.File != nil {
		m.fileHookUnmap(target, target.Start, target.End)
		if adj != nil {
			m.fileHookUnmap(adj, adj.Start, adj.End)
		}
	}
	m.beginTree() // one tree write: readers see the old or the merged form
	for _, r := range remove {
		m.vmaErase(r)
	}
	if adj != nil {
		m.vmaStartWrite(adj)
		m.treeErase(adj.Start)
	}
	m.vmaSetRange(target, start, end, pgoff)
	if adj != nil {
		unlock := iMmapLockWrite(adj)
		adj.Start, adj.Pgoff = adjStart, adjPgoff
		unlock()
		m.treeStore(adj.Start, adj.End, adj)
	}
	m.commitTree()
	if target.File != nil && !skipUprobe {
		m.hookMmap(target)
		if adj != nil {
			m.hookMmap(adj)
		}
	}
	for _, r := range remove {
		if r.File != nil {
			m.fileHookUnmap(r, r.Start, r.End)
			r.File.Inode.iMmapRemove(r)
		}
		// anon_vma_merge(): the removed VMA's anon_vma is already the
		// target's (dup_anon_vma), unlink it.
		unlinkAnonVMAs(r)
		m.mapCount--
	}
}

// mergeExistingRange mirrors mm/vma.c:vma_merge_existing_range(): the
// attributes of [g.start, g.end) inside g.middle change to g's; merge it
// into prev and/or next if they now match. Returns the merged VMA or nil.
func (m *MM) mergeExistingRange(g *vmaMerge) *VMA {
	middle, prev := g.middle, g.prev
	start, end := g.start, g.end
	leftSide := start == middle.Start
	rightSide := end == middle.End
	if g.flags&VM_SPECIAL != 0 || (!leftSide && !rightSide) {
		return nil
	}
	mergeLeft := leftSide && g.canMergeLeft()
	mergeRight := false
	var next *VMA
	if rightSide {
		next = m.vmaNextFrom(middle.End)
		g.next = next
		mergeRight = g.canMergeRight(mergeLeft)
	}
	if !mergeLeft && !mergeRight {
		return nil
	}
	removeMiddle := leftSide && rightSide
	pglen := (end - start) >> pgtable.PageShift
	switch {
	case mergeLeft && mergeRight:
		// prev extends over middle and next; both are removed.
		if next.AnonVMA != nil {
			dupAnonVMA(prev, next)
		} else {
			dupAnonVMA(prev, middle)
		}
		m.commitMerge(prev, prev.Start, next.End, prev.Pgoff, []*VMA{middle, next}, nil, 0, 0, false)
		return prev
	case mergeLeft:
		dupAnonVMA(prev, middle)
		if removeMiddle {
			m.commitMerge(prev, prev.Start, end, prev.Pgoff, []*VMA{middle}, nil, 0, 0, false)
		} else {
			m.commitMerge(prev, prev.Start, end, prev.Pgoff, nil, middle, end,
				middle.Pgoff+((end-middle.Start)>>pgtable.PageShift), false)
		}
		return prev
	default: // mergeRight
		dupAnonVMA(next, middle)
		if removeMiddle {
			m.commitMerge(next, start, next.End, next.Pgoff-pglen, []*VMA{middle}, nil, 0, 0, false)
		} else {
			// middle shrinks to [middle.Start, start), next grows down.
			// commit_merge manipulates middle and adjusts next.
			newNextPgoff := next.Pgoff - pglen
			m.commitMerge(middle, middle.Start, start, middle.Pgoff, nil, next, start, newNextPgoff, false)
		}
		return next
	}
}

// vmaModify mirrors mm/vma.c:vma_modify(): try to merge, else split off the
// parts of vma outside [start, end). Returns the VMA now covering exactly
// [start, end) (or a merged VMA containing it).
func (m *MM) vmaModify(g *vmaMerge) *VMA {
	if merged := m.mergeExistingRange(g); merged != nil {
		return merged
	}
	v := g.middle
	if v.Start < g.start {
		m.splitVMA(v, g.start, true)
	}
	if v.End > g.end {
		m.splitVMA(v, g.end, false)
	}
	return v
}
