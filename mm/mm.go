package mm

import (
	"sync"
	"sync/atomic"

	"mmlab/locking"
	"mmlab/locking/lockrank"
	"mmlab/machine"
	"mmlab/mm/mt"
	"mmlab/mm/pgtable"
	"mmlab/uapi"
)

// mm_struct flags (include/linux/mm_types.h, MMF_*).
const (
	MMF_HAS_UPROBES    = 19
	MMF_RECALC_UPROBES = 20
)

// Hooks are the calls mm makes "up" into uprobes (kernel/events/uprobes.c);
// uprobes implements them so that mm need not import it. All are called with
// the mmap lock held for write, except Exit.
type Hooks interface {
	// MmapFile mirrors uprobe_mmap(): a file VMA appeared or changed range.
	MmapFile(mm *MM, vma *VMA)
	// Munmap mirrors uprobe_munmap(): [start,end) of vma goes away.
	Munmap(mm *MM, vma *VMA, start, end uint64)
	// DupMmap mirrors uprobe_dup_mmap(): old is being copied into new.
	DupMmap(old, new *MM)
	// Exit mirrors uprobe_clear_state() at __mmput().
	Exit(mm *MM)
}

// Namespace numbers the address spaces and inodes of one model kernel:
// each MM's ID and each Inode's Ino, from 1 up in the order they are made,
// never reused. Inode numbers are what get_next_ino() hands the inodes of
// the kernel's pseudo filesystems (shmem's among them); the model gives
// every file one. An MM knows its namespace: its fork's child (dup_mm) and
// the inodes of its shared anonymous mappings (shmem_zero_setup) draw from
// it. Two namespaces share nothing, so runs in one process each number
// their objects as a fresh process would. The zero value is ready to use.
type Namespace struct {
	lastMMID atomic.Int64
	lastIno  atomic.Uint64
	zero     atomic.Pointer[pgtable.Page] // zeroPage's, made on first use
}

// zeroPage returns the namespace's shared zero page (ZERO_PAGE), which
// read faults on private anonymous memory map (do_anonymous_page without
// FAULT_FLAG_WRITE). Never written; its mapcount counts only this
// namespace's mappings.
func (ns *Namespace) zeroPage() *pgtable.Page {
	if p := ns.zero.Load(); p != nil {
		return p
	}
	ns.zero.CompareAndSwap(nil, pgtable.NewAnonPage())
	return ns.zero.Load()
}

// MM mirrors struct mm_struct: one address space.
type MM struct {
	// ID identifies the MM in traces and experiments: unique in its
	// Namespace.
	ID int64

	ns *Namespace // where ID came from (New)

	// MmapLock is the mmap_lock rwsem. Order: after dup_mmap_sem, before
	// VMA locks, i_mmap_rwsem and ptLock. Held for write, it protects the
	// VMA tree, every VMA's range, pgoff, flags and anon_vma, mapCount and
	// the i_mmap membership of this MM's VMAs. Faults hold it for read.
	// Take it through MmapReadLock / MmapWriteLock, which keep lockSeq.
	MmapLock locking.RWSem

	// lockSeq is mm_lock_seq: odd while MmapLock is write-held.
	lockSeq locking.SeqCount

	// vmaWriters is vma_writer_wait, where the mmap write lock's holder
	// waits for a VMA's readers (vma_lock.go). wrWaiter is that holder, for
	// the wait's sleep and accounting (MmapLock, write).
	vmaWriters vmaWriterWait
	wrWaiter   locking.Waiter

	// mt is mm_mt, the VMA tree. Written under MmapLock (write); readable
	// without any lock (each walk sees one snapshot).
	mt mt.Tree[VMA]

	// batch is the tree write in progress, published whole at its end
	// (beginTree/commitTree), as one maple-tree store publishes a split or a
	// merge: a lock-free reader never sees the gap between erasing a range
	// and storing its new form. batchDepth counts nested begins (MmapLock,
	// write).
	batch      *mt.Batch[VMA]
	batchDepth int
	// pendingHooks are the Hooks calls made during a batch, run after it
	// is published (MmapLock, write).
	pendingHooks []func()

	// mapCount is map_count, the number of VMAs (MmapLock).
	mapCount int

	// PT is the page table. Its entries are protected by its own split
	// locks; which ranges may hold entries is decided under MmapLock.
	PT *pgtable.Table

	// ptLock is page_table_lock, as anon_vma_prepare() uses it: it
	// serialises giving a VMA an anon_vma under the read lock. Innermost
	// of the mm locks (only pgtable's own locks nest inside).
	ptLock sync.Mutex

	flags atomic.Uint64 // MMF_* bits

	// Users mirrors mm_users (tasks and temporary users).
	Users atomic.Int32

	// Hooks, if set, receive the uprobes calls. Set before use.
	Hooks Hooks

	// MmapBase is mmap_base, where top-down placement starts (0: the
	// default). Set before use.
	MmapBase uint64

	exited bool // exit_mmap ran (MmapLock)

	// feat are the machine features the address-space rules follow
	// (protection keys, mmap_min_addr, la57). Fixed at New; a fork's
	// child has its parent's.
	feat machine.Features

	// pkeyAllocationMap and execOnlyPkey are mm_context_t's
	// pkey_allocation_map (bit k: key k allocated) and execute_only_pkey
	// (-1: none yet), set as init_new_context() sets them with OSPKE and
	// copied by fork (arch_dup_pkeys) (MmapLock, write).
	pkeyAllocationMap uint16
	execOnlyPkey      int

	// gapFix is the kernel's answer to the mremap gap (gapfix.go), fixed
	// at New or NewWith; a fork's child has its parent's.
	gapFix GapFix
}

// New returns an empty address space in ns on a machine with features f,
// in v6.19's kernel (GapFixNone; NewWith chooses).
func New(ns *Namespace, f machine.Features) *MM {
	m := &MM{ID: ns.lastMMID.Add(1), ns: ns, PT: new(pgtable.Table), feat: f, gapFix: GapFixNone}
	if f.OSPKE {
		m.pkeyAllocationMap, m.execOnlyPkey = 0x1, -1 // key 0 is allocated implicitly
	}
	m.MmapLock.SetName(uapi.MmapLockName) // its name in stats and wait accounting (locking.BlockRecorder)
	m.MmapLock.SetClass(lockrank.MmapLock)
	m.vmaWriters.init()
	m.Users.Store(1)
	return m
}

// MmapWriteLock mirrors include/linux/mmap_lock.h:mmap_write_lock(): down_write,
// then mm_lock_seqcount_begin.
func (m *MM) MmapWriteLock(w locking.Waiter) {
	m.MmapLock.DownWrite(w)
	m.lockSeq.WriteBegin()
	m.wrWaiter = w
}

// MmapWriteLockNested is MmapWriteLock of a second mm while the caller
// holds one mm's lock (dup_mmap: the child's inside the parent's), at
// lockdep subclass sub. Mirrors mmap_write_lock_nested().
func (m *MM) MmapWriteLockNested(w locking.Waiter, sub uint8) {
	m.MmapLock.DownWriteNested(w, sub)
	m.lockSeq.WriteBegin()
	m.wrWaiter = w
}

// MmapWriteLockKillable mirrors mmap_write_lock_killable(): EINTR when the
// waiting task is killed.
func (m *MM) MmapWriteLockKillable(w locking.Waiter) error {
	if err := m.MmapLock.DownWriteKillable(w); err != nil {
		return err
	}
	m.lockSeq.WriteBegin()
	m.wrWaiter = w
	return nil
}

// MmapWriteTrylock mirrors seed 000's mmap_write_trylock(): on success the
// sequence begins too, so per-VMA readers see the writer.
func (m *MM) MmapWriteTrylock() bool {
	if !m.MmapLock.DownWriteTrylock() {
		return false
	}
	m.lockSeq.WriteBegin()
	m.wrWaiter = nil
	return true
}

// MmapWriteUnlock mirrors mmap_write_unlock(): vma_end_write_all (the
// sequence becomes even, ending every VMA write lock), then up_write.
func (m *MM) MmapWriteUnlock() {
	m.vmaEndWriteAll()
	m.MmapLock.UpWrite()
}

// MmapWriteDowngrade mirrors mmap_write_downgrade().
func (m *MM) MmapWriteDowngrade() {
	m.vmaEndWriteAll()
	m.MmapLock.DowngradeWrite()
}

// vmaEndWriteAll mirrors vma_end_write_all(): mm_lock_seqcount_end.
func (m *MM) vmaEndWriteAll() { m.lockSeq.WriteEnd() }

// MmapReadLock mirrors mmap_read_lock().
func (m *MM) MmapReadLock(w locking.Waiter) { m.MmapLock.DownRead(w) }

// MmapReadLockKillable mirrors mmap_read_lock_killable().
func (m *MM) MmapReadLockKillable(w locking.Waiter) error {
	return m.MmapLock.DownReadKillable(w)
}

// MmapReadTrylock mirrors mmap_read_trylock().
func (m *MM) MmapReadTrylock() bool { return m.MmapLock.DownReadTrylock() }

// MmapReadUnlock mirrors mmap_read_unlock().
func (m *MM) MmapReadUnlock() { m.MmapLock.UpRead() }

// LockSeq gives mm_lock_seq's raw value (odd while write-locked), for
// per-VMA locks and speculation.
func (m *MM) LockSeq() *locking.SeqCount { return &m.lockSeq }

// MapCount returns map_count. Caller holds the mmap lock.
func (m *MM) MapCount() int { return m.mapCount }

// FlagSet, FlagTest and FlagClear mirror mm_flags_set/test/clear.
func (m *MM) FlagSet(bit uint) { m.flags.Or(1 << bit) }

// FlagTest reports whether MMF bit is set.
func (m *MM) FlagTest(bit uint) bool { return m.flags.Load()&(1<<bit) != 0 }

// FlagClear clears MMF bit.
func (m *MM) FlagClear(bit uint) { m.flags.And(^uint64(1 << bit)) }

// FindVMA mirrors find_vma(): the first VMA with End > addr, or nil. Caller
// holds the mmap lock (or accepts an unvalidated snapshot).
func (m *MM) FindVMA(addr uint64) *VMA {
	_, _, v := m.mt.Find(addr)
	return v
}

// VMALookup mirrors vma_lookup(): the VMA containing addr, or nil.
func (m *MM) VMALookup(addr uint64) *VMA { return m.mt.Load(addr) }

// VMAs returns the VMAs in address order from one snapshot of the tree.
// Caller holds the mmap lock for the VMAs' fields to be stable.
func (m *MM) VMAs() []*VMA {
	out := make([]*VMA, 0, m.mt.Len())
	for _, v := range m.mt.All() {
		out = append(out, v)
	}
	return out
}

// Tree gives the VMA tree, for lock-free walkers (RCU readers).
func (m *MM) Tree() *mt.Tree[VMA] { return &m.mt }

// vmaPrevNext returns the VMAs around the gap or range [start,end): the last
// VMA with start < start, and the first VMA with end > end... as the
// kernel's vma_prev/vma_next at the edges of the range.
func (m *MM) vmaPrev(addr uint64) *VMA {
	_, _, v := m.mt.Prev(addr)
	return v
}

// vmaNextFrom returns the first VMA with Start >= addr.
func (m *MM) vmaNextFrom(addr uint64) *VMA {
	for r, v := range m.mt.From(addr) {
		if r.Start >= addr {
			return v
		}
	}
	return nil
}

// vmasIn returns the VMAs intersecting [start,end), in order.
func (m *MM) vmasIn(start, end uint64) []*VMA {
	var out []*VMA
	for r, v := range m.mt.From(start) {
		if r.Start >= end {
			break
		}
		out = append(out, v)
	}
	return out
}
