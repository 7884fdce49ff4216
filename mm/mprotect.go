package mm

import (
	"time"

	"mmlab/errno"
	"mmlab/locking"
	"mmlab/mm/pgtable"
	"mmlab/sched"
)

// Mprotect mirrors mm/mprotect.c:do_mprotect_pkey() for mprotect(2) (pkey
// -1): change the protection of [start, start+length), VMA by VMA, splitting
// and merging as mprotect_fixup() does. Each VMA's protection key follows
// arch_override_mprotect_pkey() (pkeys.go), for the calling thread w. A hole in the range gives ENOMEM after the VMAs
// before it have been changed, as in the kernel.
func (m *MM) Mprotect(w locking.Waiter, start, length uint64, prot int) error {
	if offsetInPage(start) {
		return errno.EINVAL
	}
	if length == 0 {
		return nil
	}
	length = pageAlign(length)
	end := start + length
	if end <= start {
		return errno.ENOMEM
	}
	if prot&^(PROT_READ|PROT_WRITE|PROT_EXEC) != 0 {
		return errno.EINVAL
	}
	if err := m.MmapWriteLockKillable(w); err != nil {
		return err
	}
	defer m.MmapWriteUnlock()
	defer m.checkInvariants()

	pkru := pkruOf(w)
	vmas := m.vmasIn(start, end)
	if len(vmas) == 0 || vmas[0].Start > start {
		return errno.ENOMEM
	}
	vma := vmas[0]
	prev := m.vmaPrev(vma.Start)
	if start > vma.Start {
		prev = vma
	}
	nstart, tmp := start, vma.Start
	for vma != nil && vma.Start < end {
		if vma.Start != tmp {
			return errno.ENOMEM
		}
		newFlags := calcVMProtBits(prot, m.overrideMprotectPkey(vma, prot, pkru)) | vma.Flags&^(VM_ACCESS_FLAGS|ARCH_VM_PKEY_FLAGS)
		if newFlags&^(newFlags>>4)&VM_ACCESS_FLAGS != 0 {
			return errno.EACCES
		}
		tmp = min(vma.End, end)
		v := m.mprotectFixup(vma, prev, nstart, tmp, newFlags)
		prev = v
		tmp = v.End
		nstart = tmp
		vma = m.vmaNextFrom(tmp)
	}
	if tmp < end {
		return errno.ENOMEM
	}
	return nil
}

// mprotectFixup mirrors mm/mprotect.c:mprotect_fixup(): VM_ACCOUNT is added
// when a private mapping becomes writable, and dropped when an anonymous one
// that never had a page becomes read-only; then change_protection() walks
// the PTEs, under the mmap write lock. Returns the VMA covering [start, end)
// afterwards.
func (m *MM) mprotectFixup(vma, prev *VMA, start, end uint64, newFlags VMFlags) *VMA {
	old := vma.Flags
	if newFlags == old {
		return vma
	}
	if newFlags&VM_WRITE != 0 {
		if old&(VM_ACCOUNT|VM_WRITE|VM_HUGETLB|VM_SHARED|VM_NORESERVE) == 0 {
			newFlags |= VM_ACCOUNT
		}
	} else if old&VM_ACCOUNT != 0 && vma.IsAnonymous() && vma.AnonVMA == nil {
		newFlags &^= VM_ACCOUNT
	}
	g := &vmaMerge{prev: prev, middle: vma, start: start, end: end,
		pgoff: vma.Pgoff + (start-vma.Start)>>pgtable.PageShift,
		flags: newFlags, file: vma.File, anonVMA: vma.AnonVMA, name: vma.Name}
	v := m.vmaModify(g)
	m.vmaStartWrite(v)
	v.Flags = newFlags
	m.changeProtection(v, old)
	return v
}

// changeProtection mirrors mm/mprotect.c:change_protection() for the PTE
// write bit after v's flags changed from old: a VMA that loses write has its
// present PTEs write-protected; a private one that gains write has the PTEs
// of its exclusive anonymous pages made writable at once
// (vma_wants_manual_pte_write_upgrade, can_change_private_pte_writable), a
// shared one keeps them for the write fault (anonymous shared memory wants
// no writenotify). Model choice: PageAnonExclusive is "anonymous and
// mapped once"; the model has no soft-dirty or userfaultfd tracking.
func (m *MM) changeProtection(v *VMA, old VMFlags) {
	switch {
	case old&VM_WRITE != 0 && v.Flags&VM_WRITE == 0:
		chargePTEs(m.PT.ChangeProtection(v.Start, v.End, false, nil))
	case old&VM_WRITE == 0 && v.Flags&VM_WRITE != 0 && v.Flags&VM_SHARED == 0:
		chargePTEs(m.PT.ChangeProtection(v.Start, v.End, true, func(p pgtable.PTE) bool {
			return p.Page.IsAnon() && !m.isZeroPage(p.Page) && p.Page.MapCount() == 1 // vm_normal_page() is NULL for the zero page
		}))
	}
}

// pteInstructions is change_pte_range()'s work per PTE it changes besides
// ptep_modify_prot_start()'s locked exchange: the loop, the present and
// NUMA checks, pte_modify() and ptep_modify_prot_commit()'s store. A model
// choice (20 instructions), no count of the compiled loop being at hand.
const pteInstructions = 20

// chargePTEs charges, on a simulated machine, the work of change_pte_range()
// for n changed PTEs: each one locked read-modify-write
// (ptep_modify_prot_start → ptep_get_and_clear, an xchg on SMP x86-64) and
// pteInstructions instructions at the machine's costs. The walk changes
// them at once and pays the time after (a model choice: nothing of the
// model reads a PTE's protection meanwhile but under the locks the walk
// holds). A no-op outside a sim run.
func chargePTEs(n int) {
	s, _, _, ok := sched.SimCPU()
	if !ok || n == 0 {
		return
	}
	d := s.SimMachine()
	if d == nil {
		return
	}
	sched.Charge(time.Duration(float64(n) * (pteInstructions*d.Costs.Instruction.NS + d.Costs.LockedRMW.NS)))
}
