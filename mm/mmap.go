package mm

import (
	"mmlab/errno"
	"mmlab/locking"
	"mmlab/mm/pgtable"
	"mmlab/sched"
)

func pageAlign(n uint64) uint64 { return (n + pgtable.PageSize - 1) &^ (pgtable.PageSize - 1) }

func offsetInPage(n uint64) bool { return n&(pgtable.PageSize-1) != 0 }

// Mmap mirrors the mmap(2) path (arch sys_mmap, vm_mmap_pgoff, do_mmap,
// mmap_region): map length bytes at addr with prot and flags (Linux values;
// without MAP_FIXED the kernel's top-down placement chooses the address) of
// file at offset off (file nil: anonymous). The write lock is
// taken killably; with MAP_POPULATE it is dropped and the range is faulted
// in under the read lock.
func (m *MM) Mmap(w locking.Waiter, addr, length uint64, prot, flags int, file *File, off uint64) (uint64, error) {
	if offsetInPage(off) {
		return 0, errno.EINVAL
	}
	if err := m.MmapWriteLockKillable(w); err != nil {
		return 0, err
	}
	addr, populate, err := m.doMmap(pkruOf(w), addr, length, prot, flags, file, off>>pgtable.PageShift)
	m.checkInvariants()
	m.MmapWriteUnlock()
	if err == nil && populate != 0 {
		m.mmPopulate(w, addr, populate)
	}
	return addr, err
}

// doMmap mirrors mm/mmap.c:do_mmap() for the calling thread whose PKRU is
// pkru: a PROT_EXEC-only mapping gets the mm's execute-only protection key
// (key 0 when none is free), before the address is chosen, as in the
// kernel. Returns the address and the length to populate. Caller holds the
// write lock.
func (m *MM) doMmap(pkru *PKRU, addr, length uint64, prot, flags int, file *File, pgoff uint64) (uint64, uint64, error) {
	if length == 0 {
		return 0, 0, errno.EINVAL
	}
	if flags&MAP_FIXED_NOREPLACE != 0 {
		flags |= MAP_FIXED
	}
	if flags&MAP_FIXED == 0 {
		addr = m.roundHintToMin(addr)
	}
	length = pageAlign(length)
	if length == 0 {
		return 0, 0, errno.ENOMEM
	}
	if pgoff+length>>pgtable.PageShift < pgoff { // offset overflow
		return 0, 0, errEOVERFLOW
	}
	pkey := 0
	if prot == PROT_EXEC {
		pkey = max(m.executeOnlyPkey(pkru), 0)
	}
	addr, err := m.getUnmappedArea(addr, length, flags&MAP_FIXED != 0)
	if err != nil {
		return 0, 0, err
	}
	if flags&MAP_FIXED_NOREPLACE != 0 && len(m.vmasIn(addr, addr+length)) > 0 {
		return 0, 0, errno.EEXIST
	}
	if file != nil && !fileMmapOK(pgoff, length) {
		return 0, 0, errEOVERFLOW
	}
	vmFlags := calcVMProtBits(prot, pkey) | VM_MAYREAD | VM_MAYWRITE | VM_MAYEXEC
	switch flags & MAP_TYPE {
	case MAP_SHARED:
		vmFlags |= VM_SHARED | VM_MAYSHARE
		if file == nil {
			pgoff = 0
		}
	case MAP_PRIVATE:
		if file == nil {
			pgoff = addr >> pgtable.PageShift
		}
	default:
		return 0, 0, errno.EINVAL
	}
	if err := m.mmapRegion(file, addr, length, vmFlags, pgoff); err != nil {
		return 0, 0, err
	}
	var populate uint64
	if flags&MAP_POPULATE != 0 {
		populate = length
	}
	return addr, populate, nil
}

// errEOVERFLOW is EOVERFLOW, which package errno names (its table) but does
// not declare as a constant.
const errEOVERFLOW = errno.Errno(75)

// maxLFSFileSize is MAX_LFS_FILESIZE on 64-bit kernels (LLONG_MAX).
const maxLFSFileSize = 1<<63 - 1

// fileMmapOK mirrors mm/mmap.c:file_mmap_ok(): the mapping must end at or
// below the largest file offset, which file_mmap_size_max() gives as
// MAX_LFS_FILESIZE for a regular file. Every file of the model is a regular
// file (a model choice: the kernel also maps devices, whose limit differs).
func fileMmapOK(pgoff, length uint64) bool {
	if length > maxLFSFileSize {
		return false
	}
	return pgoff <= (maxLFSFileSize-length)>>pgtable.PageShift
}

// accountableMapping mirrors mm/vma.c:accountable_mapping(): private
// writable mappings are charged and get VM_ACCOUNT.
func accountableMapping(f VMFlags) bool {
	return f&(VM_NORESERVE|VM_SHARED|VM_WRITE) == VM_WRITE
}

// mmapRegion mirrors mm/vma.c:__mmap_region(): unmap what is there
// (MAP_FIXED), merge with a neighbour or create a VMA, and complete.
func (m *MM) mmapRegion(file *File, addr, length uint64, vmFlags VMFlags, pgoff uint64) error {
	end := addr + length
	// __mmap_setup: gather and detach the VMAs in the way.
	detached, prev, next := m.gatherMunmap(addr, end)
	if detached == nil {
		prev = m.vmaPrev(addr)
		next = m.vmaNextFrom(end)
	}
	if accountableMapping(vmFlags) {
		vmFlags |= VM_ACCOUNT
	}
	// vms_clean_up_area: clear the old PTEs.
	m.zapVMAs(detached)

	// The new or expanded VMA replaces the old ones in one tree write: a
	// lock-free reader sees either the old mappings or the new one.
	m.beginTree()
	m.detachVMAs(detached)
	var v *VMA
	if prev != nil || next != nil {
		g := &vmaMerge{prev: prev, next: next, start: addr, end: end, pgoff: pgoff, flags: vmFlags, file: file}
		v = m.mergeNewRange(g)
	}
	if v == nil {
		v = &VMA{Start: addr, End: end, Pgoff: pgoff, Flags: vmFlags, File: file, MM: m}
		v.LockSeq.Store(^uint64(0))
		if file == nil && vmFlags&VM_SHARED != 0 {
			v.File = Open(newShmemInode(m.ns, length))
		}
		m.vmaStore(v)
		m.mapCount++
		if v.File != nil {
			v.File.Inode.iMmapInsertAfter(v, nil)
		}
	}
	m.commitTree()
	// __mmap_complete.
	m.completeMunmap(detached)
	m.hookMmap(v)
	return nil
}

// gatherMunmap mirrors vms_gather_munmap_vmas(): split the VMAs at start and
// end. Returns the VMAs inside [start, end) (nil if none), still in the tree
// (detachVMAs takes them out), and the VMAs left before and after the range.
func (m *MM) gatherMunmap(start, end uint64) (vmas []*VMA, prev, next *VMA) {
	vmas = m.vmasIn(start, end)
	if len(vmas) == 0 {
		return nil, nil, nil
	}
	if first := vmas[0]; first.Start < start {
		m.splitVMA(first, start, true)
	}
	if last := vmas[len(vmas)-1]; last.End > end {
		m.splitVMA(last, end, false)
	}
	for _, v := range vmas {
		m.fileHookUnmap(v, v.Start, v.End)
	}
	return vmas, m.vmaPrev(start), m.vmaNextFrom(end)
}

// detachVMAs takes gathered VMAs out of the tree in one tree write
// (vma_iter_clear_gfp over the range), or as part of the caller's batch.
func (m *MM) detachVMAs(vmas []*VMA) {
	m.beginTree()
	for _, v := range vmas {
		m.vmaErase(v)
		m.mapCount--
	}
	m.commitTree()
}

// zapVMAs mirrors unmap_vmas() over detached VMAs: clear their PTEs. A
// simulated machine charges each present one its cost (zap_pte_range(),
// with zap_pmd_range()'s cond_resched(); a model choice: after each PTE).
func (m *MM) zapVMAs(vmas []*VMA) {
	for _, v := range vmas {
		sched.ChargeCostCondResched(sched.CostZapPage, m.PT.Zap(v.Start, v.End, nil))
	}
}

// completeMunmap mirrors vms_complete_munmap_vmas(): free detached VMAs.
func (m *MM) completeMunmap(vmas []*VMA) {
	for _, v := range vmas {
		m.removeVMA(v)
	}
}

// Munmap mirrors munmap(2) (__vm_munmap with unlock: detach under the write
// lock, downgrade, then zap and free under the read lock).
func (m *MM) Munmap(w locking.Waiter, start, length uint64) error {
	if err := m.MmapWriteLockKillable(w); err != nil {
		return err
	}
	downgraded, err := m.doVmiMunmap(start, length, true)
	m.checkInvariants()
	if downgraded {
		m.MmapReadUnlock()
	} else {
		m.MmapWriteUnlock()
	}
	return err
}

// doVmiMunmap mirrors mm/vma.c:do_vmi_munmap(): check the range, then unmap
// the VMAs in it. With downgrade (do_vmi_munmap's unlock) the write lock is
// downgraded once the VMAs are detached, and downgraded reports that the
// caller now holds the read lock; otherwise the write lock is held
// throughout. Caller holds the write lock.
func (m *MM) doVmiMunmap(start, length uint64, downgrade bool) (downgraded bool, err error) {
	if err := m.munmapRangeCheck(start, length); err != nil {
		return false, err
	}
	length = pageAlign(length)
	detached, _, _ := m.gatherMunmap(start, start+length)
	if detached == nil {
		return false, nil
	}
	m.detachVMAs(detached)
	if downgrade {
		m.MmapWriteDowngrade()
	}
	m.zapVMAs(detached)
	m.completeMunmap(detached)
	return downgrade, nil
}

// munmapRangeCheck is do_vmi_munmap()'s check of the range it is given:
// page-aligned start, below TASK_SIZE, a length that fits and is not 0
// once page-aligned.
func (m *MM) munmapRangeCheck(start, length uint64) error {
	if offsetInPage(start) || start > m.TaskSize() || length > m.TaskSize()-start || pageAlign(length) == 0 {
		return errno.EINVAL
	}
	return nil
}

// mmPopulate mirrors mm/gup.c:__mm_populate() with ignore_errors: under the
// read lock, fault in every page of [start, start+length) as
// populate_vma_page_range() would (write faults for private writable VMAs),
// going on at the next VMA after a failure.
func (m *MM) mmPopulate(w locking.Waiter, start, length uint64) {
	end := start + length
	m.MmapReadLock(w)
	defer m.MmapReadUnlock()
	for _, v := range m.vmasIn(start, end) {
		if v.Flags&(VM_IO|VM_PFNMAP) != 0 || v.Flags&VM_ACCESS_FLAGS == 0 {
			continue
		}
		s, e := max(start, v.Start), min(end, v.End)
		write := v.Flags&(VM_WRITE|VM_SHARED) == VM_WRITE
		m.populateVMA(v, s, e, write)
	}
}

// populateVMA faults in [s, e) of v. Private anonymous memory takes a bulk
// path: a write populate installs every PTE and a fresh page
// (pgtable.PopulateAnon); a read populate maps the shared zero page at every
// none PTE (pgtable.Populate), as do_anonymous_page() does for a fault
// without FAULT_FLAG_WRITE, young as the kernel's zero-page PTE is
// (vm_page_prot has _PAGE_ACCESSED), so that a read-only populate of any size
// allocates page-table slots only. The rest faults page by page and stops at
// the first failure (a page past EOF). A simulated
// machine charges each page of the range its cost (populate_vma_page_range
// → __get_user_pages → handle_mm_fault, a page's allocation, zeroing and
// mapping), under the read lock as the kernel pays it, with the
// cond_resched() that __get_user_pages() calls for each page.
func (m *MM) populateVMA(v *VMA, s, e uint64, write bool) {
	sched.ChargeCostCondResched(sched.CostPopulatePage, int((e-s)>>pgtable.PageShift))
	if write && v.IsAnonymous() {
		m.anonVMAPrepare(v)
		m.PT.PopulateAnon(s, e, v.Pgoff+(s-v.Start)>>pgtable.PageShift, true)
		return
	}
	if !write && v.IsAnonymous() && v.special == nil && v.Flags&VM_MAYSHARE == 0 {
		zero := m.ns.zeroPage()
		m.PT.Populate(s, e, func(uint64) *pgtable.Page { return zero }, false)
		return
	}
	for a := s; a < e; a += pgtable.PageSize {
		if pte, ok := m.PT.Lookup(a); ok && (!write || pte.Write) {
			continue
		}
		if m.handleFault(v, a, write) != nil {
			return
		}
	}
}
