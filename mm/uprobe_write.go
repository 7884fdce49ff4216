package mm

import (
	"bytes"

	"mmlab/errno"
	"mmlab/locking"
	"mmlab/mm/pgtable"
	"mmlab/sched"
)

// This file is what package uprobes needs from mm beyond the Hooks: the page
// part of a breakpoint write (kernel/events/uprobes.c:uprobe_write(), v6.16+)
// and a lock-free read of one byte of a mapped page (is_trap_at_addr()).

// UprobeWrite mirrors the page handling of kernel/events/uprobes.c:
// uprobe_write() and __uprobe_write() (v6.16+) for data at vaddr in v, a
// private file VMA of m. The caller holds m's mmap lock for write.
//
//   - verify is called with the bytes now at vaddr (GUP with FOLL_FORCE) and
//     returns false when there is nothing to do (verify_opcode: the
//     breakpoint is already there, or already gone).
//   - When registering, copy-on-write is broken first (FOLL_WRITE): the page
//     that gets the bytes is the mm's own anonymous copy, never the page
//     cache page, which stays untouched. An anonymous page mapped only here
//     (AnonExclusive) is written in place.
//   - When unregistering, a page that is not anonymous has no breakpoint to
//     undo; a shared anonymous page (after fork) is copied first.
//   - The VMA is write-locked (see below), the PTE is cleared and flush is
//     called before the bytes change
//     (ptep_clear_flush): flush must make every CPU drop its translations
//     of m (a TLB shootdown), so no model CPU reads the page while it is
//     written. The PTE is then set again, dirty and read-only, or, when
//     unregistering leaves the page identical to the page cache page, left
//     clear, so that the next fault maps the file's page again.
//
// It returns EINVAL for a VMA that is not a COW mapping, EINTR if w has a
// fatal signal pending (GUP refuses to fault for a killed caller), and the
// fault's error if the page cannot be faulted in.
func (m *MM) UprobeWrite(w locking.Waiter, v *VMA, vaddr uint64, data []byte, register bool,
	verify func(cur []byte) bool, flush func()) error {
	if v.Flags&(VM_SHARED|VM_MAYWRITE) != VM_MAYWRITE || v.File == nil { // is_cow_mapping
		return errno.EINVAL
	}
	if w != nil && sched.TryRecv(w.Fatal()) {
		return errno.EINTR
	}
	a := vaddr &^ (pgtable.PageSize - 1)
	off := int(vaddr - a)
	if off+len(data) > pgtable.PageSize {
		return errno.EINVAL
	}
	pte, ok := m.PT.Lookup(a)
	if !ok {
		if err := m.handleFault(v, a, false); err != nil {
			return err
		}
		if pte, ok = m.PT.Lookup(a); !ok {
			return errno.EAGAIN
		}
	}
	cur := pte.Page
	if !verify(cur.Bytes()[off : off+len(data)]) {
		return nil
	}
	if !register && !cur.IsAnon() {
		return nil
	}
	// The kernel clears, flushes, writes and sets the PTE under the PTE
	// lock, which keeps faults out. The model cannot hold a ptl across the
	// shootdown (an IPI waits for the target's next instruction boundary,
	// which a thread spinning on the ptl never reaches), so it write-locks
	// the VMA instead: faults under the per-VMA lock back off to the mmap
	// lock, which the caller holds.
	m.vmaStartWrite(v)
	idx := v.Pgoff + (a-v.Start)>>pgtable.PageShift // linear_page_index
	np := cur
	if !cur.IsAnon() || cur.MapCount() != 1 || m.isZeroPage(cur) {
		// FOLL_WRITE on a read-only private mapping: wp_page_copy(). A
		// simulated machine charges the new page's allocation and copy
		// what populating a page costs (a model choice: the copy reads
		// a page besides writing one, which the cost leaves out).
		m.anonVMAPrepare(v)
		np = pgtable.NewAnonPageAt(idx)
		np.CopyFrom(cur)
		sched.ChargeCost(sched.CostPopulatePage, 1)
	}
	m.PT.Clear(a)
	flush()
	copy(np.Bytes()[off:], data)
	if !register && np.MapCount() == 0 {
		if orig := v.File.Inode.Cache.Get(idx); bytes.Equal(np.Bytes(), orig.Bytes()) {
			return nil // zapped: orig_page_is_identical()
		}
	}
	m.PT.Set(a, pgtable.PTE{Page: np, Dirty: true})
	return nil
}

// PeekByte returns the byte mapped at addr and true, or false when no page is
// mapped there. It neither faults nor takes a lock: the caller holds the
// mmap lock (either mode), so no breakpoint write runs meanwhile. It is
// is_trap_at_addr()'s __get_user() with page faults disabled.
func (m *MM) PeekByte(addr uint64) (byte, bool) {
	pte, ok := m.PT.Lookup(addr)
	if !ok {
		return 0, false
	}
	return pte.Page.ByteAt(int(addr & (pgtable.PageSize - 1))), true
}

// FileByte returns the byte of v's file that addr maps (the page cache's, as
// GUP with FOLL_FORCE would fault it in), or false past the end of the file.
func (v *VMA) FileByte(addr uint64) (byte, bool) {
	if v.File == nil {
		return 0, false
	}
	off := v.Pgoff<<pgtable.PageShift + addr - v.Start
	in := v.File.Inode
	if off >= in.Size {
		return 0, false
	}
	return in.Cache.Get(off >> pgtable.PageShift).ByteAt(int(off & (pgtable.PageSize - 1))), true
}
