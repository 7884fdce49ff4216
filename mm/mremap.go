package mm

import (
	"mmlab/errno"
	"mmlab/locking"
	"mmlab/mm/pgtable"
	"mmlab/sched"
)

// remap mirrors struct vma_remap_struct.
type remap struct {
	vma                  *VMA
	addr, oldLen, newLen uint64
	newAddr, delta       uint64
	flags                int
	locked, downgraded   bool
	typ                  int
	// gathered are the destination's VMAs in the GapFixGather design:
	// gathered, write-locked and still in the tree until copy_vma stores
	// the moved VMA over them (mremapToGathered).
	gathered []*VMA
}

const (
	remapNoResize = iota
	remapShrink
	remapExpand
)

func (r *remap) impliesNewAddr() bool { return r.flags&(MREMAP_FIXED|MREMAP_DONTUNMAP) != 0 }

// Mremap mirrors mm/mremap.c:do_mremap(): shrink, grow in place, or move
// (MREMAP_MAYMOVE|MREMAP_FIXED to newAddr, several VMAs at once when the
// size does not change; with MREMAP_DONTUNMAP the source stays mapped,
// emptied of its pages). Returns the new address. A model choice the kernel
// does not make: MREMAP_DONTUNMAP needs MREMAP_FIXED (the kernel takes
// newAddr as a hint without it; the model places nothing by hint).
func (m *MM) Mremap(w locking.Waiter, addr, oldLen, newLen uint64, flags int, newAddr uint64) (uint64, error) {
	r := &remap{addr: addr, oldLen: pageAlign(oldLen), newLen: pageAlign(newLen), flags: flags, newAddr: newAddr}
	if err := r.checkParams(m.TaskSize()); err != nil {
		return 0, err
	}
	if err := m.MmapWriteLockKillable(w); err != nil {
		return 0, err
	}
	r.locked = true
	var res uint64
	var err error
	if r.flags&MREMAP_FIXED != 0 && r.oldLen == r.newLen {
		res, err = m.remapMove(r)
	} else {
		r.vma = m.mt.Load(r.addr)
		if err = r.checkPrepVMA(); err == nil {
			if r.impliesNewAddr() {
				res, err = m.mremapTo(r)
			} else {
				res, err = m.mremapAt(r)
			}
		}
	}
	if r.locked {
		m.checkInvariants()
		if r.downgraded {
			m.MmapReadUnlock()
		} else {
			m.MmapWriteUnlock()
		}
	}
	return res, err
}

// checkParams mirrors check_mremap_params(), with TASK_SIZE taskSize.
func (r *remap) checkParams(taskSize uint64) error {
	if r.flags&^(MREMAP_FIXED|MREMAP_MAYMOVE|MREMAP_DONTUNMAP) != 0 || offsetInPage(r.addr) ||
		r.newLen == 0 || r.newLen > taskSize {
		return errno.EINVAL
	}
	if r.flags&MREMAP_DONTUNMAP != 0 && r.flags&MREMAP_FIXED == 0 {
		return errno.EINVAL // see Mremap
	}
	if !r.impliesNewAddr() {
		return nil
	}
	if r.newAddr > taskSize-r.newLen || offsetInPage(r.newAddr) || r.flags&MREMAP_MAYMOVE == 0 {
		return errno.EINVAL
	}
	if r.flags&MREMAP_DONTUNMAP != 0 && r.oldLen != r.newLen {
		return errno.EINVAL
	}
	if r.addr+r.oldLen > r.newAddr && r.newAddr+r.newLen > r.addr { // vrm_overlaps
		return errno.EINVAL
	}
	return nil
}

// checkPrepVMA mirrors check_prep_vma().
func (r *remap) checkPrepVMA() error {
	v := r.vma
	if v == nil {
		return errno.EFAULT
	}
	switch {
	case r.oldLen == r.newLen:
		r.typ, r.delta = remapNoResize, 0
	case r.oldLen > r.newLen:
		r.typ, r.delta = remapShrink, r.oldLen-r.newLen
	default:
		r.typ, r.delta = remapExpand, r.newLen-r.oldLen
	}
	if !r.impliesNewAddr() {
		r.newAddr = r.addr
	}
	if r.typ != remapExpand && !r.impliesNewAddr() {
		return nil
	}
	oldLen := r.oldLen
	if oldLen == 0 && v.Flags&(VM_SHARED|VM_MAYSHARE) == 0 {
		return errno.EINVAL
	}
	if r.flags&MREMAP_DONTUNMAP != 0 && v.Flags&(VM_DONTEXPAND|VM_PFNMAP) != 0 {
		return errno.EINVAL
	}
	if r.typ == remapShrink {
		oldLen = r.newLen
	}
	if oldLen > v.End-r.addr {
		return errno.EFAULT
	}
	if r.newLen == oldLen {
		return nil
	}
	if v.Flags&(VM_DONTEXPAND|VM_PFNMAP) != 0 {
		return errno.EFAULT
	}
	return nil
}

// mremapAt mirrors mremap_at(): resize without MREMAP_FIXED.
func (m *MM) mremapAt(r *remap) (uint64, error) {
	switch r.typ {
	case remapNoResize:
		return r.addr, nil
	case remapShrink:
		// shrink_vma with drop_lock: munmap the tail, downgrading. Its range
		// check refuses a tail reaching past TASK_SIZE, changing nothing.
		var err error
		if r.downgraded, err = m.doVmiMunmap(r.addr+r.newLen, r.delta, true); err != nil {
			return 0, err
		}
		return r.addr, nil
	}
	// expand_vma.
	v := r.vma
	if v.End-r.addr == r.oldLen && m.vmaExpandable(v, r.delta) {
		g := &vmaMerge{prev: v, start: v.End, end: v.End + r.delta, pgoff: v.Pgoff + v.Pages(),
			flags: v.Flags, file: v.File, anonVMA: v.AnonVMA, name: v.Name, next: m.vmaNextFrom(v.End)}
		if m.mergeNewRange(g) == nil {
			return 0, errno.ENOMEM
		}
		return r.addr, nil
	}
	if r.flags&MREMAP_MAYMOVE == 0 {
		return 0, errno.ENOMEM
	}
	// vrm_set_new_addr: a new place chosen top-down, then move_vma.
	newAddr, err := m.getUnmappedArea(0, r.newLen, false)
	if err != nil {
		return 0, err
	}
	r.newAddr = newAddr
	return m.moveVMA(r)
}

// vmaExpandable mirrors vma_expandable(): the range after v is free, and
// get_unmapped_area() with MAP_FIXED accepts v grown (it ends at or below
// TASK_SIZE, and security_mmap_addr() accepts v's start).
func (m *MM) vmaExpandable(v *VMA, delta uint64) bool {
	end := v.End + delta
	if end < v.End || len(m.vmasIn(v.End, end)) > 0 {
		return false
	}
	_, err := m.getUnmappedArea(v.Start, end-v.Start, true)
	return err == nil
}

// mremapTo mirrors mremap_to(): unmap the target, shrink first if asked,
// check the target (vrm_set_new_addr), then move. In the GapFixGather
// design it is mremapToGathered.
func (m *MM) mremapTo(r *remap) (uint64, error) {
	if m.gapFix == GapFixGather {
		return m.mremapToGathered(r)
	}
	if _, err := m.doVmiMunmap(r.newAddr, r.newLen, false); err != nil {
		return 0, err
	}
	// The destination is out of the tree now and move_vma has not stored
	// the moved VMA: a preemption point, so that the explorer can run a
	// reader here (mm/mremap.c:mremap_to, do_munmap before move_vma).
	if sched.Active() {
		sched.At("mremap_to", "do_munmap(new_addr) done, move_vma next")
	}
	return m.mremapToMove(r)
}

// mremapToMove is what mremap_to() does once the destination is unmapped:
// look the source up again, shrink first if asked, check the target
// (vrm_set_new_addr), then move.
func (m *MM) mremapToMove(r *remap) (uint64, error) {
	if r.vma = m.mt.Load(r.addr); r.vma == nil {
		return 0, errno.EFAULT
	}
	if r.typ == remapShrink {
		if _, err := m.doVmiMunmap(r.addr+r.newLen, r.delta, false); err != nil {
			return 0, err
		}
		if r.vma = m.mt.Load(r.addr); r.vma == nil {
			return 0, errno.EFAULT
		}
		r.oldLen = r.newLen
	}
	// vrm_set_new_addr: get_unmapped_area() with MAP_FIXED, whose
	// security_mmap_addr() may refuse the target (EPERM below
	// vm.mmap_min_addr without CAP_SYS_RAWIO) after it was unmapped.
	if _, err := m.getUnmappedArea(r.newAddr, r.newLen, true); err != nil {
		return 0, err
	}
	return m.moveVMA(r)
}

// moveVMA mirrors move_vma(): write-lock the source (no racing faults),
// copy_vma at the target (which may merge there), move the page tables,
// unmap the source; with MREMAP_DONTUNMAP keep the source
// (dontunmap_complete). A special mapping may refuse
// (vm_ops->mremap): the kernel then moves the page tables back and unmaps
// the copy; the model refuses before copying, with the same result (the
// target was already unmapped by the caller).
func (m *MM) moveVMA(r *remap) (uint64, error) {
	v := r.vma
	if v.special != nil && v.special.Mremap != nil {
		if err := v.special.Mremap(); err != nil {
			return 0, err
		}
	}
	m.vmaStartWrite(v) // "We don't want racing faults."
	newPgoff := v.Pgoff + (r.addr-v.Start)>>pgtable.PageShift
	nv := m.copyVMA(v, r.newAddr, r.newLen, newPgoff, r.gathered)
	r.gathered = nil // stored over and unmapped
	m.PT.Move(r.addr, r.addr+r.oldLen, r.newAddr)
	if r.flags&MREMAP_DONTUNMAP != 0 {
		// dontunmap_complete: the source loses VM_LOCKED, and its
		// anon_vma links if it moved whole.
		m.vmaStartWrite(v)
		v.Flags &^= VM_LOCKED
		if nv != v && r.addr == v.Start && r.addr+r.oldLen == v.End {
			unlinkAnonVMAs(v)
		}
		return r.newAddr, nil
	}
	// unmap_source_vma (its VM_ACCOUNT dance leaves the flags unchanged).
	// A failure is ignored, as there: with an old length of 0 (a shared
	// mapping duplicated) do_vmi_munmap refuses with EINVAL and the source
	// stays.
	_, _ = m.doVmiMunmap(r.addr, r.oldLen, false)
	return r.newAddr, nil
}

// copyVMA mirrors mm/vma.c:copy_vma(): an unfaulted anonymous VMA takes the
// pgoff of its new place (so it can merge there); try to merge with the
// target's neighbours, else link a copy. The gathered VMAs of the target
// (GapFixGather), still in the tree, leave it in the same tree write that
// stores the copy, as __mmap_region()'s new VMA replaces the ones its
// vms_gather_munmap_vmas() gathered; their unmap is completed after.
func (m *MM) copyVMA(v *VMA, addr, length, pgoff uint64, gathered []*VMA) *VMA {
	if v.IsAnonymous() && v.AnonVMA == nil {
		pgoff = addr >> pgtable.PageShift
	}
	// The target's neighbours: the gathered VMAs lie inside [addr,
	// addr+length), so they are neither.
	g := &vmaMerge{prev: m.vmaPrev(addr), next: m.vmaNextFrom(addr + length),
		start: addr, end: addr + length, pgoff: pgoff, flags: v.Flags, file: v.File,
		anonVMA: v.AnonVMA, name: v.Name, copiedFrom: v, skipUprobe: v.File != nil}
	if gathered != nil {
		m.beginTree()
		defer m.completeGathered(gathered)
		defer m.commitTree()
		m.eraseGathered(gathered)
	}
	if nv := m.mergeNewRange(g); nv != nil {
		return nv
	}
	nv := vmaDup(v)
	nv.Start, nv.End, nv.Pgoff = addr, addr+length, pgoff
	anonVMAClone(nv, v)
	m.vmaStore(nv)
	m.mapCount++
	if nv.File != nil {
		nv.File.Inode.iMmapInsertAfter(nv, nil)
	}
	return nv
}

// remapMove mirrors remap_move(): move every VMA of [addr, addr+oldLen) to
// the same offsets from newAddr (the size does not change).
func (m *MM) remapMove(r *remap) (uint64, error) {
	start, end := r.addr, r.addr+r.oldLen
	target := r.newAddr
	var res uint64
	seen := false
	var lastEnd uint64
	cursor := start
	for {
		vs := m.vmasIn(cursor, end)
		if len(vs) == 0 {
			break
		}
		v := vs[0]
		if !seen && start < v.Start {
			return 0, errno.EFAULT
		}
		a := max(v.Start, start)
		n := min(end, v.End) - a
		var offset uint64
		if seen {
			offset = v.Start - lastEnd
		}
		lastEnd = v.End
		cursor = min(end, v.End)
		sub := &remap{vma: v, addr: a, oldLen: n, newLen: n, newAddr: target + offset, flags: r.flags}
		if err := sub.checkPrepVMA(); err != nil {
			return 0, err
		}
		got, err := m.mremapTo(sub)
		if err != nil {
			return 0, err
		}
		if !seen {
			res = got
		}
		seen = true
		target = got + n
	}
	if !seen {
		return 0, errno.EFAULT
	}
	return res, nil
}
