package mm

import (
	"mmlab/locking"
	"mmlab/sched"
)

// Fork mirrors kernel/fork.c:dup_mm() and mm/mmap.c:dup_mmap(): the parent's
// mmap lock is taken for write (killable: EINTR), the child's nested inside
// it; every VMA is copied (VM_DONTCOPY skipped) with anon_vma_fork(); a file
// VMA's copy goes into i_mmap right after the parent's; page tables are
// copied only where a fault could not rebuild them (vma_needs_copy: VMAs with
// an anon_vma), anonymous pages becoming copy-on-write in both.
func (m *MM) Fork(w locking.Waiter) (*MM, error) {
	return m.ForkWith(w, ForkOptions{})
}

// vmaNeedsCopy mirrors mm/memory.c:vma_needs_copy().
func vmaNeedsCopy(v *VMA) bool {
	return v.AnonVMA != nil || v.Flags&(VM_PFNMAP|VM_MIXEDMAP|VM_MAYBE_GUARD) != 0
}

// Exit mirrors mm/mmap.c:exit_mmap() (and __mmput's uprobe_clear_state
// through Hooks.Exit) in two phases, as v6.19 has them: the page tables of
// every VMA are zapped under the mmap read lock (unmap_vmas; a simulated
// machine charges its zap_page per present PTE), which maps readers still
// share; then, under the write lock, the VMAs are detached
// and freed (vma_mark_detached, remove_vma) and the tree emptied at once
// (__mt_destroy), not range by range: an erase copies the path of its
// range (the tree is copy-on-write for its lock-free readers), which for a
// forked child that exits at once was most of what its fork and exit
// allocate.
func (m *MM) Exit() {
	sched.At("exit_mmap", "")
	m.MmapReadLock(nil)
	for _, v := range m.mt.All() {
		sched.ChargeCostCondResched(sched.CostZapPage, m.PT.Zap(v.Start, v.End, nil))
	}
	m.MmapReadUnlock()
	m.MmapWriteLock(nil)
	for _, v := range m.mt.All() {
		m.fileHookUnmap(v, v.Start, v.End)
		m.vmaStartWrite(v)
		m.vmaMarkDetached(v)
		m.mapCount--
		m.removeVMA(v)
	}
	m.mt.Clear()
	m.exited = true
	m.MmapWriteUnlock()
	if m.Hooks != nil {
		m.Hooks.Exit(m)
	}
}
