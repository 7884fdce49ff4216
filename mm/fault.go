package mm

import (
	"mmlab/errno"
	"mmlab/locking"
	"mmlab/mm/pgtable"
)

// zeroPage is the shared zero page that read faults on private anonymous
// memory map (do_anonymous_page without FAULT_FLAG_WRITE). Never written.
var zeroPage = pgtable.NewAnonPage()

// IsZeroPage reports whether p is the shared zero page.
func IsZeroPage(p *pgtable.Page) bool { return p == zeroPage }

// accessError mirrors arch/x86/mm/fault.c:access_error(): a write needs
// VM_WRITE; a read needs any access bit (x86 cannot express write- or
// exec-only pages).
func accessError(v *VMA, write bool) bool {
	if write {
		return v.Flags&VM_WRITE == 0
	}
	return v.Flags&VM_ACCESS_FLAGS == 0
}

// Fault mirrors the page-fault path (do_user_addr_fault: the VMA read lock,
// else the mmap read lock; handle_mm_fault): nil, SIGSEGV outside a VMA or against its
// protection, SIGBUS for a file page past EOF.
func (m *MM) Fault(w locking.Waiter, addr uint64, write bool) error {
	v, vmaLocked, err := m.lockForAccess(w, addr, write)
	if err != nil {
		return err
	}
	defer m.unlockAccess(v, vmaLocked)
	return m.handleFault(v, addr, write)
}

// LoadByte is a user-mode load of one byte: address to VMA to PTE to page,
// faulting the page in if it is not mapped. It does not allocate when the
// page is present.
func (m *MM) LoadByte(w locking.Waiter, addr uint64) (byte, error) {
	v, vmaLocked, err := m.lockForAccess(w, addr, false)
	if err != nil {
		return 0, err
	}
	defer m.unlockAccess(v, vmaLocked)
	pte, ok := m.PT.Lookup(addr)
	if !ok {
		if err := m.handleFault(v, addr, false); err != nil {
			return 0, err
		}
		pte, _ = m.PT.Lookup(addr)
	}
	return pte.Page.ByteAt(int(addr & (pgtable.PageSize - 1))), nil
}

// StoreByte is a user-mode store of one byte, breaking copy-on-write.
func (m *MM) StoreByte(w locking.Waiter, addr uint64, b byte) error {
	v, vmaLocked, err := m.lockForAccess(w, addr, true)
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
			return errno.SIGBUS
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
			return errno.SIGBUS // __do_fault: VM_FAULT_SIGBUS past i_size
		}
		cachePage = v.File.Inode.Cache.Get(idx)
	}
	if shared {
		m.PT.Update(a, func(old pgtable.PTE, ok bool) (pgtable.PTE, bool) {
			return pgtable.PTE{Page: cachePage, Write: write || (ok && old.Write), Dirty: write || (ok && old.Dirty)}, true
		})
		return nil
	}
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
