package mm

import (
	"mmlab/errno"
	"mmlab/locking"
	"mmlab/mm/pgtable"
)

// isZeroPage reports whether p is the shared zero page of m's namespace.
func (m *MM) isZeroPage(p *pgtable.Page) bool { return p == m.ns.zeroPage() }

// FaultCode is a page fault's error code, as far as the model's rules read
// it (arch/x86/include/asm/trap_pf.h): a read, a write (X86_PF_WRITE) or an
// instruction fetch (X86_PF_INSTR).
type FaultCode uint8

// The error-code bits.
const (
	X86_PF_WRITE FaultCode = 1 << 1
	X86_PF_INSTR FaultCode = 1 << 4
)

// The faults of the model's accesses, as siginfo gives them.
var (
	errMapErr = errno.Fault(errno.SIGSEGV, errno.SEGV_MAPERR) // bad_area_nosemaphore: no VMA
	errAccErr = errno.Fault(errno.SIGSEGV, errno.SEGV_ACCERR) // bad_area_access_error
	errBusAdr = errno.Fault(errno.SIGBUS, errno.BUS_ADRERR)   // do_sigbus: a file page past EOF
)

// AccessError mirrors arch/x86/mm/fault.c:access_error() and the signal
// bad_area_access_error() raises for it, for an access by the thread whose
// PKRU is pkru: nil when v allows it. Protection keys come first: a data
// access the PKRU forbids is SEGV_PKUERR with si_pkey (also a write to an
// execute-only VMA, as bad_area_access_from_pkeys() finds); then a write
// needs VM_WRITE and a read or an instruction fetch any access bit (x86
// pages cannot be write- or, without keys, exec-only). access_error() does
// not look at VM_EXEC: a fetch from a VMA without it faults the page in
// like a read (a file page past EOF raises SIGBUS then) and meets the NX bit
// once the page is present: NXError.
func (m *MM) AccessError(v *VMA, code FaultCode, pkru PKRU) error {
	if v == nil {
		return errMapErr
	}
	write, exec := code&X86_PF_WRITE != 0, code&X86_PF_INSTR != 0
	if !m.VMAAccessPermitted(v, write, exec, false, pkru) {
		return errno.SigInfo{Signo: errno.SIGSEGV, Code: errno.SEGV_PKUERR, Pkey: v.Flags.Pkey()}
	}
	if write && v.Flags&VM_WRITE == 0 || v.Flags&VM_ACCESS_FLAGS == 0 {
		return errAccErr
	}
	return nil
}

// NXError is the fault of an instruction fetch from a present page of v:
// SEGV_ACCERR when v is not executable (the PTE's NX bit: X86_PF_PROT |
// X86_PF_INSTR, which access_error() refuses as a "read, present" fault).
func NXError(v *VMA) error {
	if v.Flags&VM_EXEC == 0 {
		return errAccErr
	}
	return nil
}

// Fault mirrors the page-fault path of a user-mode access by thread w
// (do_user_addr_fault: the VMA read lock, else the mmap read lock;
// handle_mm_fault): nil, or the signal as AccessError gives it, or SIGBUS
// for a file page past EOF.
func (m *MM) Fault(w locking.Waiter, addr uint64, code FaultCode) error {
	v, vmaLocked, err := m.lockForAccess(w, addr, code)
	if err != nil {
		return err
	}
	defer m.unlockAccess(v, vmaLocked)
	return m.handleFault(v, addr, code&X86_PF_WRITE != 0)
}

// LoadByte is a user-mode load of one byte by thread w: address to VMA to
// PTE to page, faulting the page in if it is not mapped, with w's PKRU
// checked against the VMA's protection key. It does not allocate when the
// page is present.
func (m *MM) LoadByte(w locking.Waiter, addr uint64) (byte, error) {
	v, vmaLocked, err := m.lockForAccess(w, addr, 0)
	if err != nil {
		return 0, err
	}
	defer m.unlockAccess(v, vmaLocked)
	return m.pageByte(v, addr)
}

// StoreByte is a user-mode store of one byte by thread w, breaking
// copy-on-write.
func (m *MM) StoreByte(w locking.Waiter, addr uint64, b byte) error {
	v, vmaLocked, err := m.lockForAccess(w, addr, X86_PF_WRITE)
	if err != nil {
		return err
	}
	defer m.unlockAccess(v, vmaLocked)
	pte, ok := m.PT.Lookup(addr)
	if !ok || !pte.Write {
		if err := m.handleFault(v, addr, true); err != nil {
			return err
		}
		pte, _ = m.PT.Lookup(addr)
	}
	pte.Page.SetByteAt(int(addr&(pgtable.PageSize-1)), b)
	return nil
}

// handleFault mirrors handle_mm_fault() for the model's VMAs (do_anonymous_page,
// do_read_fault, do_cow_fault, do_shared_fault, do_wp_page). Caller holds the
// mmap lock (read or write) and has checked access.
func (m *MM) handleFault(v *VMA, addr uint64, write bool) error {
	a := addr &^ (pgtable.PageSize - 1)
	if v.special != nil || v.Name != "" {
		// special_mapping_fault: the mapping's own pages.
		idx := (a - v.Start) >> pgtable.PageShift
		if v.special == nil || idx >= uint64(len(v.special.Pages)) {
			return errBusAdr
		}
		page := v.special.Pages[idx]
		m.PT.Update(a, func(old pgtable.PTE, ok bool) (pgtable.PTE, bool) {
			return pgtable.PTE{Page: page}, !ok
		})
		return nil
	}
	shared := v.Flags&VM_MAYSHARE != 0
	if write && !shared {
		// do_anonymous_page / do_cow_fault / wp_page_copy prepare the
		// anon_vma first: a COW fault past EOF leaves one behind.
		m.anonVMAPrepare(v)
	}
	var cachePage *pgtable.Page
	if v.File != nil {
		idx := v.Pgoff + (a-v.Start)>>pgtable.PageShift
		if idx >= v.File.Inode.pagesInFile() {
			return errBusAdr // __do_fault: VM_FAULT_SIGBUS past i_size
		}
		cachePage = v.File.Inode.Cache.Get(idx)
	}
	if shared {
		m.PT.Update(a, func(old pgtable.PTE, ok bool) (pgtable.PTE, bool) {
			return pgtable.PTE{Page: cachePage, Write: write || (ok && old.Write), Dirty: write || (ok && old.Dirty)}, true
		})
		return nil
	}
	zeroPage := m.ns.zeroPage()
	m.PT.Update(a, func(old pgtable.PTE, ok bool) (pgtable.PTE, bool) {
		if ok && (!write || old.Write) {
			return old, true // raced with another fault
		}
		if !write {
			if cachePage != nil {
				return pgtable.PTE{Page: cachePage}, true
			}
			return pgtable.PTE{Page: zeroPage}, true
		}
		// Write: reuse an exclusive anonymous page (wp_page_reuse),
		// else copy (wp_page_copy / do_cow_fault / do_anonymous_page).
		if ok && old.Page.IsAnon() && old.Page != zeroPage && old.Page.MapCount() == 1 {
			return pgtable.PTE{Page: old.Page, Write: true, Dirty: true}, true
		}
		np := pgtable.NewAnonPage()
		switch {
		case ok && old.Page != zeroPage:
			np.CopyFrom(old.Page)
		case !ok && cachePage != nil:
			np.CopyFrom(cachePage)
		}
		return pgtable.PTE{Page: np, Write: true, Dirty: true}, true
	})
	return nil
}
