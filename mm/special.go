package mm

import (
	"mmlab/errno"
	"mmlab/machine"
	"mmlab/mm/pgtable"
)

// DefaultMmapBase is where top-down placement starts (mm->mmap_base): below
// the x86-64 stack area, as a process without address-space randomisation has
// it. It is the same with 5-level paging: arch/x86/mm/mmap.c:
// arch_pick_mmap_layout() computes mmap_base from task_size_64bit(0), the
// 47-bit DEFAULT_MAP_WINDOW.
const DefaultMmapBase = 0x7ffff7fff000

// mmapLegacyBase is mm->mmap_legacy_base without randomisation, where the
// bottom-up fallback of top-down placement starts: TASK_UNMAPPED_BASE,
// arch/x86/mm/mmap.c:__TASK_UNMAPPED_BASE(task_size_64bit(0)) =
// PAGE_ALIGN(DEFAULT_MAP_WINDOW / 3), with 5-level paging too.
const mmapLegacyBase = (machine.DefaultMapWindow/3 + pgtable.PageSize - 1) &^ (pgtable.PageSize - 1)

// TaskSize is TASK_SIZE for a 64-bit task of m's machine
// (arch/x86/include/asm/page_64_types.h: TASK_SIZE_MAX, task_size_max()):
// 2^47 - 4096, or 2^56 - 4096 with 5-level paging. No mapping ends above
// it.
func (m *MM) TaskSize() uint64 { return m.feat.TaskSize() }

// getUnmappedArea mirrors mm/mmap.c:__get_unmapped_area() for anonymous and
// file mappings of a 64-bit task with the top-down layout (MMF_TOPDOWN):
// arch/x86/kernel/sys_x86_64.c:arch_get_unmapped_area_topdown() places the
// mapping (MAP_FIXED takes addr as it is), then the result is checked
// against TASK_SIZE and by security_mmap_addr() (securityMmapAddr), for a
// fixed address and a placed one alike. A hint below mmap_min_addr is not
// raised here: do_mmap() does that first (roundHintToMin); other callers
// (mremap, uprobes) pass hints that are not low. Stack guard gaps, THP
// alignment of large anonymous mappings (thp_get_unmapped_area_vmflags,
// which only applies without a hint) and the AMD F15h alignment are not
// modelled.
func (m *MM) getUnmappedArea(addr, length uint64, fixed bool) (uint64, error) {
	taskSize := m.TaskSize()
	if length > taskSize {
		return 0, errno.ENOMEM
	}
	if !fixed {
		var err error
		if addr, err = m.archGetUnmappedAreaTopdown(addr, length); err != nil {
			return 0, err
		}
	}
	if addr > taskSize-length {
		return 0, errno.ENOMEM
	}
	if offsetInPage(addr) {
		return 0, errno.EINVAL
	}
	if err := m.securityMmapAddr(addr); err != nil {
		return 0, err
	}
	return addr, nil
}

// securityMmapAddr mirrors security/security.c:security_mmap_addr() with
// the capability LSM alone, security/commoncap.c:cap_mmap_addr(): an
// address below dac_mmap_min_addr (vm.mmap_min_addr) needs CAP_SYS_RAWIO in
// the initial user namespace, else EPERM. In v6.19 __get_unmapped_area() is
// its only caller on x86-64 (besides vm86), so it sees every mmap, fixed or
// not, and every mremap target (vrm_set_new_addr(), vma_expandable()).
// Not modelled: SELinux's selinux_mmap_addr(), which refuses an address
// below CONFIG_LSM_MMAP_MIN_ADDR without memprotect:mmap_zero (EACCES); the
// model runs as if SELinux were off, as on the hosts it was checked on.
func (m *MM) securityMmapAddr(addr uint64) error {
	if addr < m.feat.MmapMinAddr && !m.feat.CapSysRawio {
		return errno.EPERM
	}
	return nil
}

// roundHintToMin mirrors mm/mmap.c:round_hint_to_min(), which do_mmap()
// applies to the address of a mapping without MAP_FIXED (for every caller,
// privileged or not): the hint is truncated to a page, and a hint left
// below mmap_min_addr (the larger of vm.mmap_min_addr and
// CONFIG_LSM_MMAP_MIN_ADDR) is raised to it; a hint that truncates to 0 is
// no hint.
func (m *MM) roundHintToMin(hint uint64) uint64 {
	hint &^= pgtable.PageSize - 1
	if minAddr := m.feat.MinAddr(); hint != 0 && hint < minAddr {
		return pageAlign(minAddr)
	}
	return hint
}

// mmapAddressHintValid mirrors arch/x86/mm/mmap.c:mmap_address_hint_valid():
// the range fits below TASK_SIZE and does not cross DEFAULT_MAP_WINDOW (the
// 47-bit boundary, which only 5-level paging puts below TASK_SIZE), so that
// an application that did not ask for addresses above 47 bits never gets
// one by a hint just below the boundary.
func (m *MM) mmapAddressHintValid(addr, length uint64) bool {
	if m.TaskSize()-length < addr {
		return false
	}
	return (addr > machine.DefaultMapWindow) == (addr+length > machine.DefaultMapWindow)
}

// archGetUnmappedAreaTopdown mirrors arch/x86/kernel/sys_x86_64.c:
// arch_get_unmapped_area_topdown() for a non-fixed 64-bit mapping: a valid
// free hint (truncated to a page) is used; else the highest free range below
// mm->mmap_base and at or above mmap_min_addr (unmapped_area_topdown() raises
// its low limit to it), the window reaching TASK_SIZE_MAX -
// DEFAULT_MAP_WINDOW higher when the hint is above DEFAULT_MAP_WINDOW (the
// opt-in to addresses above 47 bits with 5-level paging; without it the two
// are equal); failing that, arch_get_unmapped_area() bottom-up.
func (m *MM) archGetUnmappedAreaTopdown(addr0, length uint64) (uint64, error) {
	addr := addr0
	if addr != 0 {
		addr &^= pgtable.PageSize - 1
		if m.mmapAddressHintValid(addr, length) && len(m.vmasIn(addr, addr+length)) == 0 {
			return addr, nil
		}
	}
	high := m.MmapBase
	if high == 0 {
		high = DefaultMmapBase
	}
	if addr > machine.DefaultMapWindow {
		high += m.TaskSize() - machine.DefaultMapWindow
	}
	if a, ok := m.freeTopdown(max(pgtable.PageSize, m.feat.MinAddr()), high, length); ok {
		return a, nil
	}
	return m.archGetUnmappedArea(addr0, length)
}

// archGetUnmappedArea mirrors arch/x86/kernel/sys_x86_64.c:
// arch_get_unmapped_area() for a non-fixed 64-bit mapping, as the fallback
// of top-down placement calls it: the window is [mmap_legacy_base,
// task_size_64bit(addr > DEFAULT_MAP_WINDOW)), a free hint (rounded up to a
// page) that ends in it is used, else the lowest free range in it at or
// above mmap_min_addr (unmapped_area()).
func (m *MM) archGetUnmappedArea(addr, length uint64) (uint64, error) {
	end := uint64(machine.DefaultMapWindow) // find_start_end(): task_size_64bit()
	if addr > machine.DefaultMapWindow {
		end = m.TaskSize()
	}
	if length > end {
		return 0, errno.ENOMEM
	}
	if addr != 0 {
		addr = pageAlign(addr)
		if end-length >= addr && len(m.vmasIn(addr, addr+length)) == 0 {
			return addr, nil
		}
	}
	low := max(uint64(mmapLegacyBase), m.feat.MinAddr())
	cursor := low
	for r := range m.mt.From(low) {
		if r.Start >= end {
			break
		}
		if r.Start > cursor && r.Start-cursor >= length {
			return cursor, nil
		}
		cursor = max(cursor, r.End)
	}
	if cursor < end && end-cursor >= length {
		return cursor, nil
	}
	return 0, errno.ENOMEM
}

// freeTopdown is unmapped_area_topdown() for a page-aligned length with no
// alignment or gap: the highest addr with [addr, addr+length) free, addr >=
// low and addr+length <= high.
func (m *MM) freeTopdown(low, high, length uint64) (uint64, bool) {
	for high > low {
		_, _, v := m.mt.Prev(high)
		if v != nil && v.End > high {
			high = v.Start
			continue
		}
		holeLow := low
		if v != nil {
			holeLow = max(v.End, low)
		}
		if high > holeLow && high-holeLow >= length {
			return high - length, true
		}
		if v == nil {
			break
		}
		high = v.Start
	}
	return 0, false
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
	low = max(low, pgtable.PageSize, m.feat.MinAddr()) // unmapped_area(): low_limit >= mmap_min_addr
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
