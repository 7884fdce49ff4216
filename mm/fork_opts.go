package mm

import (
	"mmlab/errno"
	"mmlab/locking"
	"mmlab/locking/lockrank"
	"mmlab/sched"
)

// ForkOptions tune ForkWith for seed 000's two designs of dup_mm() and for
// fault injection in tests.
type ForkOptions struct {
	// Locked says the caller already holds m's mmap lock for write (seed
	// 000 "after": kernel.Task takes it with a trylock under dup_mmap_sem,
	// or without dup_mmap_sem); ForkWith releases it either way.
	Locked bool
	// NewMM, if set, is called with the child's mm before any of its VMAs
	// is linked into a file's i_mmap (seed 000 patch 7: tsk->mm = mm before
	// uprobes can find the child).
	NewMM func(child *MM)
	// FailAfter > 0 makes the copy fail with ENOMEM after that many VMAs
	// were copied, as a failed vm_area_dup() or anon_vma_fork() does.
	FailAfter int
	// OnVMA, if set, is called after the n-th VMA (1-based) was copied and
	// linked, with both mmap locks held (a step driver for tests).
	OnVMA func(n int)
}

// ForkWith mirrors mm/mmap.c:dup_mmap() (Fork is ForkWith with no options).
// In a sim run each present PTE it copies costs the machine's fork_page
// (sched.CostForkPage); the rest of dup_mmap()'s work is in the fork's
// fixed cost, which the caller charges (kernel.Task.ForkWith).
// On failure after the child was created it returns the half-built child
// with the error: its copied VMAs are in the tree and in i_mmap (the
// kernel's XA_ZERO_ENTRY marks where the copy stopped), and the caller
// tears it down (dup_mm's mmput), inside or outside dup_mmap_sem as its
// design says.
func (m *MM) ForkWith(w locking.Waiter, o ForkOptions) (*MM, error) {
	if !o.Locked {
		if err := m.MmapWriteLockKillable(w); err != nil {
			return nil, err
		}
	}
	defer m.MmapWriteUnlock()
	child := New(m.ns, m.feat)
	child.gapFix = m.gapFix // the kernel is the parent's
	// dup_mm() copies the mm_struct, mmap_base with it; arch_dup_mmap()
	// copies the protection-key state (arch_dup_pkeys).
	child.MmapBase = m.MmapBase
	child.pkeyAllocationMap, child.execOnlyPkey = m.pkeyAllocationMap, m.execOnlyPkey
	child.Hooks = m.Hooks
	if o.NewMM != nil {
		o.NewMM(child)
	}
	if m.Hooks != nil {
		m.Hooks.DupMmap(m, child)
	}
	child.MmapWriteLockNested(nil, lockrank.SingleDepthNesting) // cannot contend: nobody sees child yet
	defer child.MmapWriteUnlock()
	// The child's tree is built in one batch (as __mt_dup builds it whole):
	// each tree node is copied once, not once per VMA.
	child.beginTree()
	var err error
	n := 0
	for _, v := range m.VMAs() {
		m.vmaStartWrite(v) // dup_mmap write-locks every parent VMA, copied or not
		if v.Flags&VM_DONTCOPY != 0 {
			continue
		}
		if o.FailAfter > 0 && n == o.FailAfter {
			err = errno.ENOMEM
			break
		}
		nv := vmaDup(v)
		nv.MM = child
		nv.Flags &^= VM_LOCKED
		anonVMAFork(nv, v)
		child.vmaStore(nv)
		child.mapCount++
		if nv.File != nil {
			nv.File.Inode.iMmapInsertAfter(nv, v)
		}
		if vmaNeedsCopy(v) {
			// copy_page_range(): each present PTE is a
			// copy_present_pte() of copy_pte_range(), charged
			// here, with both mmap locks held, so that the
			// parent's hold grows with its resident pages as
			// dup_mmap()'s does; copy_pte_range() calls
			// cond_resched() between its batches (a model
			// choice: after each PTE).
			sched.ChargeCostCondResched(sched.CostForkPage, m.PT.CopyCOW(child.PT, v.Start, v.End))
		}
		n++
		if o.OnVMA != nil {
			o.OnVMA(n)
		}
		sched.At("dup_mmap", "vma copied")
	}
	child.commitTree()
	if err != nil {
		return child, err
	}
	child.checkInvariants()
	m.checkInvariants()
	return child, nil
}
