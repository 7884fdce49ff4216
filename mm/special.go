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

// InstallSpecialMapping mirrors mm/mmap.c:_install_special_mapping(): a VMA
// named name (shown in maps as "[uprobes]" and the like) whose pages are
// pages, mapped on fault. flags get VM_DONTEXPAND added, so the VMA never
// merges or grows. The caller holds the mmap write lock and has found the
// range free.
func (m *MM) InstallSpecialMapping(addr, length uint64, flags VMFlags, name string, pages []*pgtable.Page) (*VMA, error) {
	if offsetInPage(addr) || length == 0 || len(m.vmasIn(addr, addr+pageAlign(length))) > 0 {
		return nil, errno.EINVAL
	}
	v := &VMA{Start: addr, End: addr + pageAlign(length), Flags: flags | VM_DONTEXPAND,
		Name: name, MM: m, specialPages: pages}
	v.LockSeq.Store(^uint64(0))
	m.vmaStore(v)
	m.mapCount++
	return v, nil
}
