package mm

import (
	"mmlab/sched"
)

// mremapToGathered is mremap_to() in the GapFixGather design, a model
// choice the kernel does not make: the destination is unmapped the way
// mm/vma.c:__mmap_region() unmaps what MAP_FIXED maps over, so that no
// reader without mmap_lock ever finds [newAddr, newAddr+newLen) empty.
//
//  1. vms_gather_munmap_vmas(): split the VMAs at the range's ends, then
//     write-lock each VMA inside it (vma_start_write) and mark it detached
//     (vma_mark_detached); they stay in the tree. A per-VMA-lock reader that
//     finds one sees it write-locked (vma_start_read's first check) and falls
//     back to mmap_read_lock (lock_next_vma_under_mmap_lock), which waits
//     for this mremap to finish.
//  2. vms_clean_up_area(): clear their page tables while they are still in
//     the tree.
//  3. v6.19's steps after do_munmap(): look the source up again, shrink it
//     if asked (shrink_vma), check the target (vrm_set_new_addr), move_vma().
//  4. copy_vma() stores the moved VMA over the gathered ones in one tree
//     write (copyVMA), then vms_complete_munmap_vmas() completes their
//     unmap; move_vma() unmaps the source as before.
//
// A failure in step 3 or in move_vma() before the copy ends as
// vms_abort_munmap_vmas() does once the page tables are cleared: the range
// is cleared in the tree and the unmap completed (abortGathered). That is
// also what v6.19 leaves after such a failure (the destination unmapped
// by do_munmap()), so every sequential result is v6.19's.
func (m *MM) mremapToGathered(r *remap) (uint64, error) {
	start := r.newAddr
	if err := m.munmapRangeCheck(start, r.newLen); err != nil {
		return 0, err // do_munmap's own checks, before anything changed
	}
	end := start + pageAlign(r.newLen)
	gathered, _, _ := m.gatherMunmap(start, end)
	for _, v := range gathered {
		m.vmaStartWrite(v)
		m.vmaMarkDetached(v)
	}
	m.zapVMAs(gathered) // vms_clean_up_area
	// The destination's VMAs are write-locked in the tree and move_vma has
	// not stored the moved VMA: the point where v6.19 has the range empty.
	if sched.Active() {
		sched.At("mremap_to", "vms_gather_munmap_vmas(new_addr) and vms_clean_up_area done, move_vma next")
	}
	r.gathered = gathered
	res, err := m.mremapToMove(r)
	if r.gathered != nil { // not stored over: the move failed before copy_vma
		m.abortGathered(r.gathered)
		r.gathered = nil
	}
	return res, err
}

// eraseGathered takes gathered VMAs, already marked detached, out of the
// tree (part of the caller's tree write).
func (m *MM) eraseGathered(vmas []*VMA) {
	m.beginTree()
	for _, v := range vmas {
		m.treeErase(v.Start)
	}
	m.commitTree()
}

// completeGathered mirrors vms_complete_munmap_vmas() for VMAs erased from
// the tree: map_count, then remove_vma() of each.
func (m *MM) completeGathered(vmas []*VMA) {
	m.mapCount -= len(vmas)
	m.completeMunmap(vmas)
}

// abortGathered mirrors vms_abort_munmap_vmas() after vms_clean_up_area():
// the page tables are gone, so the VMAs cannot be put back; the range is
// cleared in the tree (mas_store_gfp of NULL) and the unmap completed.
func (m *MM) abortGathered(vmas []*VMA) {
	m.eraseGathered(vmas)
	m.completeGathered(vmas)
}
