package mm

import (
	"mmlab/errno"
	"mmlab/mm/pgtable"
)

// DefaultMmapBase is where top-down placement starts (mm->mmap_base): below
// the x86-64 stack area, as a process without address-space randomisation has
// it.
const DefaultMmapBase = 0x7ffff7fff000

// getUnmappedArea mirrors mm/mmap.c:__get_unmapped_area() for anonymous and
// file mappings: MAP_FIXED takes addr as it is; otherwise a free hint is
// used, else the highest gap below the mmap base that fits
// (arch_get_unmapped_area_topdown). Stack guard gaps are not modelled.
func (m *MM) getUnmappedArea(addr, length uint64, fixed bool) (uint64, error) {
	if length > TaskSize {
		return 0, errno.ENOMEM
	}
	if fixed {
		if addr > TaskSize-length {
			return 0, errno.ENOMEM
		}
		if offsetInPage(addr) {
			return 0, errno.EINVAL
		}
		return addr, nil
	}
	if addr != 0 {
		addr = pageAlign(addr)
		if addr <= TaskSize-length && len(m.vmasIn(addr, addr+length)) == 0 {
			return addr, nil
		}
	}
	base := m.MmapBase
	if base == 0 {
		base = DefaultMmapBase
	}
	high := base
	for {
		_, _, v := m.mt.Prev(high)
		if v != nil && v.End > high {
			high = v.Start
			continue
		}
		low := uint64(pgtable.PageSize) // mmap_min_addr
		if v != nil {
			low = v.End
		}
		if high >= low && high-low >= length {
			return high - length, nil
		}
		if v == nil {
			return 0, errno.ENOMEM
		}
		high = v.Start
	}
}

// GetUnmappedArea is getUnmappedArea for callers holding the mmap lock
// (uprobes places its XOL area with it).
func (m *MM) GetUnmappedArea(hint, length uint64) (uint64, error) {
	return m.getUnmappedArea(hint, pageAlign(length), false)
}

// SpecialMapping mirrors struct vm_special_mapping: a kernel-provided
// mapping (the XOL page "[uprobes]", the x86 "[uprobes-trampoline]") whose
// VMAs fault in Pages and are shown in maps by Name.
type SpecialMapping struct {
	Name  string
	Pages []*pgtable.Page
	// Mremap, if set, is asked when mremap moves a VMA of the mapping; an
	// error refuses the move (vm_special_mapping.mremap: xol_mremap and
	// tramp_mremap return -EPERM).
	Mremap func() error
}

// IsSpecialMapping mirrors mm/mmap.c:vma_is_special_mapping(): v is a VMA
// of sm.
func (v *VMA) IsSpecialMapping(sm *SpecialMapping) bool { return v.special == sm }

// InstallSpecialMapping mirrors mm/mmap.c:_install_special_mapping(): a VMA
// of sm (shown in maps as sm.Name) whose pages are sm.Pages, mapped on
// fault. flags get VM_DONTEXPAND added, so the VMA never merges or grows.
// The caller holds the mmap write lock and has found the range free.
func (m *MM) InstallSpecialMapping(addr, length uint64, flags VMFlags, sm *SpecialMapping) (*VMA, error) {
	if offsetInPage(addr) || length == 0 || len(m.vmasIn(addr, addr+pageAlign(length))) > 0 {
		return nil, errno.EINVAL
	}
	v := &VMA{Start: addr, End: addr + pageAlign(length), Flags: flags | VM_DONTEXPAND,
		Name: sm.Name, MM: m, special: sm}
	v.LockSeq.Store(^uint64(0))
	m.vmaStore(v)
	m.mapCount++
	return v, nil
}

// UnmappedArea mirrors mm/vma.c:unmapped_area() (bottom-up) and
// unmapped_area_topdown() for a search with page alignment, as
// vm_unmapped_area() runs them: the lowest (or highest) page-aligned addr
// with [addr, addr+length) free, addr >= max(low, mmap_min_addr) and
// addr+length <= high. As there, the free range searched for is
// length+PAGE_SIZE-1 long (the worst case of the alignment), so a hole of
// exactly length bytes is not used. Stack guard gaps are not modelled.
// The caller holds the mmap lock.
func (m *MM) UnmappedArea(low, high, length uint64, topdown bool) (uint64, error) {
	length = pageAlign(length)
	need := length + pgtable.PageSize - 1
	low = max(low, pgtable.PageSize) // mmap_min_addr
	if length == 0 || high <= low || high-low < need {
		return 0, errno.ENOMEM
	}
	if !topdown {
		cursor := low
		for r := range m.mt.From(low) {
			if r.Start >= high {
				break
			}
			if r.Start > cursor && r.Start-cursor >= need {
				return pageAlign(cursor), nil
			}
			cursor = max(cursor, r.End)
			if cursor >= high {
				return 0, errno.ENOMEM
			}
		}
		if high-cursor >= need {
			return pageAlign(cursor), nil
		}
		return 0, errno.ENOMEM
	}
	cursor := high
	for cursor > low {
		start, end, v := m.mt.Prev(cursor)
		holeLow := low
		if v != nil {
			holeLow = max(end, low)
		}
		if cursor > holeLow && cursor-holeLow >= need {
			return (cursor - length) &^ (pgtable.PageSize - 1), nil
		}
		if v == nil {
			break
		}
		cursor = start
	}
	return 0, errno.ENOMEM
}
