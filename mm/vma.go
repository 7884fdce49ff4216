package mm

import (
	"sync"
	"sync/atomic"

	"mmlab/mm/pgtable"
)

// VMA mirrors struct vm_area_struct: the half-open range [Start, End).
// Start, End, Pgoff, Flags and AnonVMA change only under the mmap write lock
// and the VMA's write lock (vma_start_write); MM, File and Name are set once.
type VMA struct {
	Start, End uint64
	// Pgoff is vm_pgoff: the file offset in pages; for private anonymous
	// memory addr>>12 at mmap time (what makes neighbours mergeable).
	Pgoff uint64
	Flags VMFlags
	// File is the open file description mapped (nil for private anon).
	// Shared anonymous memory maps a shmem File of its own.
	File *File
	// AnonVMA is where this VMA's anonymous (COW) pages belong; nil until
	// the first anonymous page (anon_vma_prepare) or inherited by fork.
	AnonVMA *AnonVMA
	// chain is anon_vma_chain: every anon_vma this VMA is linked to (its
	// own and its ancestors'). More than one entry means a fork child.
	chain []*AnonVMA
	// Name is vm_ops->name of a special mapping ("[uprobes]").
	Name string
	// special is the special mapping of the VMA (vm_private_data with
	// special_mapping_vmops), nil for any other.
	special *SpecialMapping
	// MM is vm_mm.
	MM *MM

	// Per-VMA lock state (include/linux/mm_types.h):
	// RefCnt is vm_refcnt (0 detached, 1 attached, +1 per reader,
	// +VMA_LOCK_OFFSET while a writer drains readers); LockSeq is
	// vm_lock_seq, the mm_lock_seq value of the last write lock.
	RefCnt  atomic.Int32
	LockSeq atomic.Uint64
}

// Pages returns vma_pages(): the VMA's length in pages.
func (v *VMA) Pages() uint64 { return (v.End - v.Start) >> pgtable.PageShift }

// IsAnonymous mirrors vma_is_anonymous(): no vm_ops (private anon memory).
func (v *VMA) IsAnonymous() bool { return v.File == nil && v.Name == "" }

// IsForkChild mirrors mm/vma.c:vma_is_fork_child(): it has an anon_vma and
// more than one anon_vma_chain entry, i.e. it was inherited with pages.
func (v *VMA) IsForkChild() bool {
	return v != nil && v.AnonVMA != nil && len(v.chain) != 1
}

// ChainLen is the length of anon_vma_chain (for tests).
func (v *VMA) ChainLen() int { return len(v.chain) }

// AnonVMA mirrors struct anon_vma as far as merging and COW need it.
// An anon_vma tree spans the processes forked from one another, so its
// counters are protected by the root's rwsem (here mu), as
// anon_vma_lock_write() does; it nests inside the mmap lock and ptLock.
type AnonVMA struct {
	Root, Parent *AnonVMA
	// mu is the root's anon_vma->rwsem; only the root's is used. It
	// protects numChildren, numActiveVMAs and avcs of the whole tree.
	mu sync.Mutex
	// numChildren and numActiveVMAs mirror the fields of the same names,
	// which decide whether fork may reuse an anon_vma (anon_vma_clone).
	numChildren, numActiveVMAs int
	// avcs counts anon_vma_chain entries linking VMAs to this anon_vma.
	avcs int
}

func newAnonVMA() *AnonVMA {
	a := &AnonVMA{}
	a.Root, a.Parent = a, a
	return a
}

// anonVMAChainLink links v to a (anon_vma_chain_link).
func anonVMAChainLink(v *VMA, a *AnonVMA) {
	v.chain = append(v.chain, a)
	a.avcs++
}

// anonVMAClone mirrors mm/rmap.c:anon_vma_clone(): link dst to every anon_vma
// src is linked to; when dst has no anon_vma yet but src has (fork), reuse an
// anon_vma with no VMAs and fewer than two children.
func anonVMAClone(dst, src *VMA) {
	dst.chain = nil
	if len(src.chain) == 0 {
		return
	}
	root := src.chain[0].Root
	root.mu.Lock()
	defer root.mu.Unlock()
	for i := len(src.chain) - 1; i >= 0; i-- {
		a := src.chain[i]
		anonVMAChainLink(dst, a)
		if dst.AnonVMA == nil && src.AnonVMA != nil && a.numChildren < 2 && a.numActiveVMAs == 0 {
			dst.AnonVMA = a
		}
	}
	// The kernel builds the list by adding at the head while walking src
	// in reverse, so dst's order equals src's. Keep that order.
	for i, j := 0, len(dst.chain)-1; i < j; i, j = i+1, j-1 {
		dst.chain[i], dst.chain[j] = dst.chain[j], dst.chain[i]
	}
	if dst.AnonVMA != nil {
		dst.AnonVMA.numActiveVMAs++
	}
}

// anonVMAFork mirrors mm/rmap.c:anon_vma_fork(): v is the child's copy of pv.
func anonVMAFork(v, pv *VMA) {
	v.chain = nil
	if pv.AnonVMA == nil {
		return
	}
	v.AnonVMA = nil
	anonVMAClone(v, pv)
	if v.AnonVMA != nil {
		return
	}
	a := &AnonVMA{Root: pv.AnonVMA.Root, Parent: pv.AnonVMA}
	a.Root.mu.Lock()
	defer a.Root.mu.Unlock()
	a.numActiveVMAs++
	v.AnonVMA = a
	// anon_vma_chain_link adds at the head of same_vma.
	v.chain = append([]*AnonVMA{a}, v.chain...)
	a.avcs++
	a.Parent.numChildren++
}

// unlinkAnonVMAs mirrors mm/rmap.c:unlink_anon_vmas().
func unlinkAnonVMAs(v *VMA) {
	if len(v.chain) > 0 {
		root := v.chain[0].Root
		root.mu.Lock()
		defer root.mu.Unlock()
	}
	for _, a := range v.chain {
		a.avcs--
		if a.avcs == 0 {
			a.Parent.numChildren--
		}
	}
	if v.AnonVMA != nil {
		v.AnonVMA.numActiveVMAs--
	}
	v.AnonVMA = nil
	v.chain = nil
}

// dupAnonVMA mirrors mm/vma.c:dup_anon_vma(): dst takes src's anon_vma if it
// has none.
func dupAnonVMA(dst, src *VMA) {
	if src != nil && src.AnonVMA != nil && dst.AnonVMA == nil {
		dst.MM.vmaStartWrite(dst)
		dst.AnonVMA = src.AnonVMA
		anonVMAClone(dst, src)
	}
}

// anonVMACompatible mirrors mm/vma.c:anon_vma_compatible().
func anonVMACompatible(a, b *VMA) bool {
	return a.End == b.Start && a.File == b.File &&
		(a.Flags^b.Flags)&^(VM_ACCESS_FLAGS|VM_IGNORE_MERGE) == 0 &&
		b.Pgoff == a.Pgoff+((b.Start-a.Start)>>pgtable.PageShift)
}

// reusableAnonVMA mirrors mm/vma.c:reusable_anon_vma().
func reusableAnonVMA(old, a, b *VMA) *AnonVMA {
	if anonVMACompatible(a, b) && old.AnonVMA != nil && len(old.chain) == 1 {
		return old.AnonVMA
	}
	return nil
}

// findMergeableAnonVMA mirrors mm/vma.c:find_mergeable_anon_vma(): reuse a
// neighbour's anon_vma so that a later mprotect can merge the two again.
func (m *MM) findMergeableAnonVMA(v *VMA) *AnonVMA {
	if next := m.mt.Load(v.End); next != nil {
		if a := reusableAnonVMA(next, v, next); a != nil {
			return a
		}
	}
	if v.Start > 0 {
		if prev := m.mt.Load(v.Start - 1); prev != nil {
			return reusableAnonVMA(prev, prev, v)
		}
	}
	return nil
}

// anonVMAPrepare mirrors mm/rmap.c:__anon_vma_prepare(), called from faults
// under the mmap read lock.
func (m *MM) anonVMAPrepare(v *VMA) {
	m.ptLock.Lock()
	defer m.ptLock.Unlock()
	if v.AnonVMA != nil {
		return
	}
	a := m.findMergeableAnonVMA(v)
	if a == nil {
		a = newAnonVMA()
		a.numChildren++ // self-parent link for a new root
	}
	a.Root.mu.Lock()
	defer a.Root.mu.Unlock()
	v.AnonVMA = a
	anonVMAChainLink(v, a)
	a.numActiveVMAs++
}

// vmaDup mirrors vm_area_dup(): a copy of v sharing file and anon_vma, with
// an empty chain (callers clone it).
func vmaDup(v *VMA) *VMA {
	n := &VMA{Start: v.Start, End: v.End, Pgoff: v.Pgoff, Flags: v.Flags,
		File: v.File, AnonVMA: v.AnonVMA, Name: v.Name, MM: v.MM, special: v.special}
	n.LockSeq.Store(^uint64(0))
	return n
}

// beginTree starts (or nests into) a batch of tree writes that readers see
// at once, at the outermost commitTree. Between the two, reads of the tree
// (m.mt, vmasIn, vmaPrev...) still see the old version: callers do their
// lookups before beginTree.
func (m *MM) beginTree() {
	if m.batchDepth == 0 {
		b := m.mt.Batch()
		m.batch = &b
	}
	m.batchDepth++
}

// commitTree ends a beginTree; the outermost one publishes the batch.
func (m *MM) commitTree() {
	m.batchDepth--
	if m.batchDepth == 0 {
		m.batch.Commit()
		m.batch = nil
		// Hooks run after the tree write, as vma_complete calls
		// uprobe_mmap after the store.
		hooks := m.pendingHooks
		m.pendingHooks = nil
		for _, h := range hooks {
			h()
		}
	}
}

// treeStore and treeErase write the tree, through the open batch if any.
func (m *MM) treeStore(start, end uint64, v *VMA) {
	if m.batch != nil {
		m.batch.Store(start, end, v)
		return
	}
	m.mt.Store(start, end, v)
}

func (m *MM) treeErase(start uint64) {
	if m.batch != nil {
		m.batch.Erase(start)
		return
	}
	m.mt.Erase(start)
}

// vmaStore links v into the tree and marks it attached.
func (m *MM) vmaStore(v *VMA) {
	m.vmaStartWrite(v)
	m.treeStore(v.Start, v.End, v)
	vmaMarkAttached(v)
}

// vmaErase removes v from the tree and marks it detached.
func (m *MM) vmaErase(v *VMA) {
	m.vmaStartWrite(v)
	m.treeErase(v.Start)
	m.vmaMarkDetached(v)
}

// vmaSetRange changes v's range in place (vma_set_range + tree update), in
// one tree write. Callers erase any VMA the new range overlaps first.
func (m *MM) vmaSetRange(v *VMA, start, end, pgoff uint64) {
	m.vmaStartWrite(v)
	m.beginTree()
	m.treeErase(v.Start)
	unlock := iMmapLockWrite(v)
	v.Start, v.End, v.Pgoff = start, end, pgoff
	unlock()
	m.treeStore(start, end, v)
	m.commitTree()
}

// iMmapLockWrite mirrors the i_mmap_lock_write() of mm/vma.c:vma_prepare()
// (released in vma_complete()): a file VMA's range and offset change under
// its inode's i_mmap_rwsem held for write, so that IMmap's readers (rmap
// walks, uprobe registration) see the old or the new range, never one
// half-changed. Returns the unlock (a no-op for a VMA without a file).
func iMmapLockWrite(v *VMA) (unlock func()) {
	if v.File == nil {
		return func() {}
	}
	rw := &v.File.Inode.IMmapRwsem
	rw.DownWrite(nil)
	return rw.UpWrite
}

// splitVMA mirrors mm/vma.c:__split_vma(): split v at addr; the new VMA is
// the part below addr if newBelow, else the part above. Returns the new VMA.
func (m *MM) splitVMA(v *VMA, addr uint64, newBelow bool) *VMA {
	n := vmaDup(v)
	if newBelow {
		n.End = addr
	} else {
		n.Start = addr
		n.Pgoff += (addr - v.Start) >> pgtable.PageShift
	}
	anonVMAClone(n, v)
	if v.File != nil {
		m.fileHookUnmap(v, v.Start, v.End)
	}
	m.beginTree() // the kernel stores both halves in one tree write
	if newBelow {
		m.vmaSetRange(v, addr, v.End, v.Pgoff+((addr-v.Start)>>pgtable.PageShift))
	} else {
		m.vmaSetRange(v, v.Start, addr, v.Pgoff)
	}
	m.vmaStore(n)
	m.commitTree()
	m.mapCount++
	if v.File != nil {
		v.File.Inode.iMmapInsertAfter(n, v)
		m.hookMmap(v)
		m.hookMmap(n)
	}
	return n
}

// removeVMA mirrors remove_vma() plus unlink_file_vma(): drop a VMA already
// erased from the tree.
func (m *MM) removeVMA(v *VMA) {
	if v.File != nil {
		v.File.Inode.iMmapRemove(v)
	}
	unlinkAnonVMAs(v)
}

func (m *MM) hookMmap(v *VMA) {
	if m.Hooks == nil || v.File == nil {
		return
	}
	if m.batchDepth > 0 {
		m.pendingHooks = append(m.pendingHooks, func() { m.Hooks.MmapFile(m, v) })
		return
	}
	m.Hooks.MmapFile(m, v)
}

func (m *MM) fileHookUnmap(v *VMA, start, end uint64) {
	if m.Hooks == nil || v.File == nil {
		return
	}
	if m.batchDepth > 0 {
		m.pendingHooks = append(m.pendingHooks, func() { m.Hooks.Munmap(m, v, start, end) })
		return
	}
	m.Hooks.Munmap(m, v, start, end)
}
