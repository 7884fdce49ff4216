package mm

import (
	"fmt"

	"mmlab/mm/pgtable"
)

// CheckInvariants verifies, with the mmap lock held by the caller, what must
// hold between operations: VMAs sorted and non-overlapping, page aligned,
// the tree's ranges equal to the VMAs' own, map_count equal to the number of
// VMAs, every file VMA in its inode's i_mmap, every anon_vma linked in its
// VMA's chain, and every present PTE inside a VMA. It returns the first
// violation found.
func (m *MM) CheckInvariants() error {
	var prevEnd uint64
	n := 0
	for r, v := range m.mt.All() {
		n++
		if r.Start != v.Start || r.End != v.End {
			return fmt.Errorf("tree range %#x-%#x holds VMA %#x-%#x", r.Start, r.End, v.Start, v.End)
		}
		if v.Start >= v.End || offsetInPage(v.Start) || offsetInPage(v.End) {
			return fmt.Errorf("bad VMA range %#x-%#x", v.Start, v.End)
		}
		if v.Start < prevEnd {
			return fmt.Errorf("VMA %#x-%#x overlaps the previous one ending at %#x", v.Start, v.End, prevEnd)
		}
		prevEnd = v.End
		if v.MM != m {
			return fmt.Errorf("VMA %#x-%#x belongs to another mm", v.Start, v.End)
		}
		if v.File != nil && len(v.File.Inode.IMmap(v.Pgoff, v.Pages())) == 0 {
			return fmt.Errorf("file VMA %#x-%#x missing from i_mmap", v.Start, v.End)
		}
		if v.AnonVMA != nil {
			found := false
			for _, a := range v.chain {
				found = found || a == v.AnonVMA
			}
			if !found {
				return fmt.Errorf("VMA %#x-%#x: anon_vma not in its chain", v.Start, v.End)
			}
		} else if len(v.chain) != 0 {
			return fmt.Errorf("VMA %#x-%#x: chain without anon_vma", v.Start, v.End)
		}
	}
	if n != m.mapCount {
		return fmt.Errorf("map_count %d, %d VMAs", m.mapCount, n)
	}
	var bad error
	m.PT.Walk(0, pgtable.AddrLimit, func(addr uint64, _ pgtable.PTE) bool {
		if m.mt.Load(addr) == nil {
			bad = fmt.Errorf("PTE at %#x outside every VMA", addr)
			return false
		}
		return true
	})
	return bad
}

// checkInvariants panics on a violated invariant when built with the
// invariants tag. Caller holds the mmap lock.
func (m *MM) checkInvariants() {
	if !invariants {
		return
	}
	if err := m.CheckInvariants(); err != nil {
		panic("mm: " + err.Error())
	}
}
