package mm

import (
	"errors"
	"runtime"

	"mmlab/locking"
	"mmlab/rcu"
	"mmlab/sched"
)

// Per-VMA locks, the v6.15+ scheme (include/linux/mmap_lock.h,
// mm/mmap_lock.c). A VMA's lock is two words:
//
//   - RefCnt (vm_refcnt): 0 while the VMA is detached from the tree, 1 while
//     attached, plus one per reader, plus VMA_LOCK_OFFSET while a writer
//     waits for the readers to leave.
//   - LockSeq (vm_lock_seq): the mm's mm_lock_seq (odd: inside an mmap write
//     section) at the VMA's last write lock. The VMA is write-locked while it
//     equals the mm's current sequence, so MmapWriteUnlock and
//     MmapWriteDowngrade, which end the write section (the sequence becomes
//     even), drop every VMA write lock at once (vma_end_write_all).
//
// Readers find VMAs under RCU; in the model that is one mt.Snapshot of the
// tree, which stays complete and readable however the tree changes after it
// was taken. A reader on a model thread (its Waiter names it: rcu.OnThread)
// holds a classic RCU read section (rcu.ReadLock) across the lookup, so
// rcu.Classic's Synchronize waits for it; other readers take none. Go's
// garbage collector stands in for the RCU-deferred freeing of VMAs and tree
// nodes (call_rcu), so mm never waits for a grace period to free memory: a
// VMA a reader can still reach is never freed. A
// reader must not read a VMA's fields before it holds the VMA's read lock
// (the snapshot's range is immutable and may be used instead), exactly as
// the kernel's readers may not trust them.

// VMA lock constants (include/linux/mm_types.h).
const (
	VMA_LOCK_OFFSET = 0x40000000
	VMA_REF_LIMIT   = VMA_LOCK_OFFSET - 1
)

// VMALockName is the lock name a writer's wait for VMA readers is accounted
// under (locking.BlockRecorder), next to uapi.MmapLockName.
const VMALockName = "vma_lock"

// errVMADetached is vma_start_read's ERR_PTR(-EAGAIN): the VMA was detached
// under the reader; look the address up again.
var errVMADetached = errors.New("mm: VMA detached")

// vmaWriterWait is mm->vma_writer_wait (an rcuwait): at most one task waits
// on it, the holder of the mmap write lock. wake is a one-slot channel so a
// wake-up is never lost; the waiter rechecks its condition after each.
type vmaWriterWait struct {
	wake chan struct{}
}

func (ww *vmaWriterWait) init() { ww.wake = make(chan struct{}, 1) }

// wakeUp mirrors rcuwait_wake_up() (sched.Notify in a deterministic run).
func (ww *vmaWriterWait) wakeUp() {
	if sched.Active() {
		sched.Notify(ww.wake)
		return
	}
	select {
	case ww.wake <- struct{}{}:
	default:
	}
}

// isVMAWriterOnly mirrors is_vma_writer_only(): a writer waits and no
// reader is left (attached or detaching).
func isVMAWriterOnly(refcnt int32) bool {
	return refcnt&VMA_LOCK_OFFSET != 0 && refcnt <= VMA_LOCK_OFFSET+1
}

// vmaRefcountPut mirrors vma_refcount_put(): drop a reader's reference and
// wake the writer if it was the last one in its way.
func (m *MM) vmaRefcountPut(v *VMA) {
	if n := v.RefCnt.Add(-1); n != 0 && isVMAWriterOnly(n) {
		m.vmaWriters.wakeUp()
	}
}

// refcountIncNotZeroLimited mirrors __refcount_inc_not_zero_limited_acquire():
// increment unless the count is 0 or the result would pass limit; returns
// the old count.
func refcountIncNotZeroLimited(v *VMA, limit int32) (old int32, ok bool) {
	for {
		old = v.RefCnt.Load()
		if old == 0 || old+1 > limit {
			return old, false
		}
		if v.RefCnt.CompareAndSwap(old, old+1) {
			return old, true
		}
	}
}

// vmaStartRead mirrors mm/mmap_lock.c:vma_start_read(): try to read-lock v,
// found under RCU. It returns v locked; nil if v is write-locked (or the
// reader limit is reached: the caller falls back to the mmap lock); or
// errVMADetached if v was detached (the caller looks again).
func (m *MM) vmaStartRead(v *VMA) (*VMA, error) {
	// The early, lockless check: pointless to take a reference.
	if v.LockSeq.Load() == m.lockSeq.Raw() {
		return nil, nil
	}
	old, ok := refcountIncNotZeroLimited(v, VMA_REF_LIMIT)
	if !ok {
		if old == 0 {
			return nil, errVMADetached
		}
		return nil, nil // a writer holds VMA_LOCK_OFFSET
	}
	if v.MM != m {
		m.vmaRefcountPut(v)
		return nil, nil
	}
	// The check that counts: after taking the reference, acquire-read the
	// mm's sequence (pairs with the release in vma_end_write_all).
	if v.LockSeq.Load() == m.lockSeq.Raw() {
		m.vmaRefcountPut(v)
		return nil, nil
	}
	return v, nil
}

// VMAEndRead mirrors vma_end_read(): drop a VMA read lock.
func (m *MM) VMAEndRead(v *VMA) { m.vmaRefcountPut(v) }

// VMAStartReadLocked mirrors vma_start_read_locked(): read-lock v while
// holding the mmap read lock, which keeps writers away; it fails only when
// the reader count is at its limit (or v is detached).
func (m *MM) VMAStartReadLocked(v *VMA) bool {
	_, ok := refcountIncNotZeroLimited(v, VMA_REF_LIMIT)
	return ok
}

// LockVMAUnderRCU mirrors mm/mmap_lock.c:lock_vma_under_rcu(): find the VMA
// containing addr and read-lock it without the mmap lock, or return nil
// (no VMA there, or it is being modified: the caller falls back to the mmap
// lock). The caller ends the read lock with VMAEndRead.
func (m *MM) LockVMAUnderRCU(addr uint64) *VMA { return m.lockVMAUnderRCU(nil, addr) }

// lockVMAUnderRCU is LockVMAUnderRCU in a classic RCU read section on th
// (none if th is nil).
//
// The kernel looks a detached VMA up again until it is gone. A model choice
// the kernel does not make: a fault that finds the same detached VMA twice
// gives up instead (the false "not locked" result the kernel allows) and
// falls back to the mmap lock, whose wait gives up the CPU, since a
// faulting model thread may share its CPU with the writer it would spin on.
func (m *MM) lockVMAUnderRCU(th *sched.Thread, addr uint64) *VMA {
	idx := rcu.ReadLock(th)
	defer rcu.ReadUnlock(th, idx)
	var detached *VMA
	for {
		snap := m.mt.Snapshot() // rcu_read_lock(); mas_walk()
		found := snap.Load(addr)
		if found == nil {
			return nil
		}
		v, err := m.vmaStartRead(found)
		if err == errVMADetached {
			if found == detached {
				return nil // see the doc comment
			}
			detached = found
			continue // replaced under us: walk again
		}
		if v == nil {
			return nil
		}
		// Locked: the fields are stable now. Is it still the right one?
		if addr < v.Start || addr >= v.End {
			m.vmaRefcountPut(v)
			return nil
		}
		return v
	}
}

// ErrVMARefLimit is lock_next_vma's ERR_PTR(-EAGAIN) after the fallback:
// the VMA's reader count is at VMA_REF_LIMIT even under the mmap read lock.
// The caller falls back to the mmap read lock for good
// (fs/proc/task_mmu.c:fallback_to_mmap_lock).
var ErrVMARefLimit = errors.New("mm: VMA reader count at its limit")

// LockNextVMA mirrors mm/mmap_lock.c:lock_next_vma() (v6.17+, as in v6.19):
// read-lock the first VMA ending above fromAddr, without the mmap lock if
// possible. It returns the VMA read-locked, nil at the end of the address
// space, errno.EINTR if the fallback's mmap_read_lock_killable was
// interrupted, or ErrVMARefLimit.
//
// The caller holds an RCU read section across the call (lock_vma_range's
// rcu_read_lock in fs/proc/task_mmu.c, or query_vma_find_by_addr's); each
// lookup is a fresh RCU view of the tree (the kernel's iterator walks the
// live tree). The fallback cannot sleep inside it: fallback is called with
// true where lock_next_vma leaves the section (rcu_read_unlock) before
// lock_next_vma_under_mmap_lock takes the mmap read lock, and with false
// where it enters it again after the lock is dropped; it may be nil.
//
// A VMA found detached (vma_start_read's -EAGAIN: marked detached while its
// writer has not yet published the tree without it) is looked up again
// until it is gone, as the kernel does. The wait is a spin: the writer must
// be able to run meanwhile, on another model CPU or outside the model CPUs
// (a spinning model thread gives its CPU only to a thread of higher
// priority, as a non-preemptible kernel thread would give it to nobody).
//
// The gap check: a VMA found above fromAddr may have been shrunk, or another
// installed below it, after the lookup; unless mmap_lock speculation shows
// that no write section ran in between, it looks again and falls back to
// the mmap lock if the answer changed.
func (m *MM) LockNextVMA(w locking.Waiter, fromAddr uint64, fallback func(before bool)) (*VMA, error) {
	for {
		seq := m.lockSeq.Raw() // mmap_lock_speculate_try_begin
		unlocked := seq&1 == 0
		_, _, found := m.mt.Find(fromAddr) // vma_next()
		if found == nil {
			return nil, nil
		}
		v, err := m.vmaStartRead(found)
		if err == errVMADetached {
			runtime.Gosched() // cpu_relax: let a writer outside the model CPUs finish
			continue          // vma_iter_set(from): look again
		}
		if v == nil {
			break
		}
		if fromAddr >= v.End {
			m.vmaRefcountPut(v)
			break
		}
		if fromAddr < v.Start && (!unlocked || m.lockSeq.Raw() != seq) {
			// Walk again (the tree shows each split, merge or
			// replacement whole, as the maple tree does); fall back if
			// another VMA is there now.
			if _, _, again := m.mt.Find(fromAddr); again != v {
				m.vmaRefcountPut(v)
				break
			}
		}
		return v, nil
	}
	// rcu_read_unlock(), then lock_next_vma_under_mmap_lock()
	if fallback != nil {
		fallback(true)
		defer fallback(false) // rcu_read_lock() again
	}
	if err := m.MmapReadLockKillable(w); err != nil {
		return nil, err
	}
	defer m.MmapReadUnlock()
	v := m.FindVMA(fromAddr)
	if v != nil && !m.VMAStartReadLocked(v) {
		return nil, ErrVMARefLimit
	}
	return v, nil
}

// vmaEnterLocked mirrors __vma_enter_locked(): if v is attached, add
// VMA_LOCK_OFFSET (new readers now fail) and wait until the readers are gone;
// reports whether it did. The wait is accounted to the mmap write lock's
// holder under VMALockName. Caller holds the mmap write lock.
func (m *MM) vmaEnterLocked(v *VMA, detaching bool) bool {
	tgt := int32(VMA_LOCK_OFFSET)
	if !detaching {
		tgt++
	}
	for { // refcount_add_not_zero
		old := v.RefCnt.Load()
		if old == 0 {
			return false
		}
		if v.RefCnt.CompareAndSwap(old, old+VMA_LOCK_OFFSET) {
			break
		}
	}
	if v.RefCnt.Load() == tgt {
		return true
	}
	w := m.wrWaiter
	t0 := sched.Now()
	for v.RefCnt.Load() != tgt {
		wait := func() { sched.Wait(v, VMALockName, m.vmaWriters.wake, nil) }
		if b, ok := w.(locking.Blocker); ok {
			b.Block(wait)
		} else {
			wait()
		}
	}
	if br, ok := w.(locking.BlockRecorder); ok {
		br.RecordBlocked(VMALockName, sched.Since(t0))
	}
	return true
}

// vmaStartWrite mirrors vma_start_write() and __vma_start_write(): write-lock
// v until the mmap write section ends, waiting for its current readers.
// Caller holds the mmap write lock. On a VMA not yet attached it only marks
// the VMA (as the kernel's callers do before storing a new VMA).
func (m *MM) vmaStartWrite(v *VMA) {
	if sched.Active() {
		sched.At("vma_start_write", "")
	}
	seq := m.lockSeq.Raw()
	if seq&1 == 0 {
		return // no write section (a fresh mm being built): nothing to exclude
	}
	if v.LockSeq.Load() == seq {
		return
	}
	locked := m.vmaEnterLocked(v, false)
	v.LockSeq.Store(seq)
	if locked {
		v.RefCnt.Add(-VMA_LOCK_OFFSET) // __vma_exit_locked
	}
}

// VMAIsWriteLocked reports whether v is write-locked in the current mmap
// write section (vma_assert_write_locked as a predicate).
func (m *MM) VMAIsWriteLocked(v *VMA) bool {
	seq := m.lockSeq.Raw()
	return seq&1 == 1 && v.LockSeq.Load() == seq
}

// vmaMarkAttached mirrors vma_mark_attached(): refcount 0 to 1 (release).
func vmaMarkAttached(v *VMA) { v.RefCnt.Store(1) }

// vmaMarkDetached mirrors mm/mmap_lock.c:vma_mark_detached(): refcount 1 to
// 0; if a reader raised it in the meantime (one that will see the write
// lock and back off), wait until it is gone. v is write-locked.
func (m *MM) vmaMarkDetached(v *VMA) {
	if v.RefCnt.Add(-1) != 0 {
		if m.vmaEnterLocked(v, true) {
			v.RefCnt.Add(-VMA_LOCK_OFFSET)
		}
	}
}

// lockForAccess mirrors the locking of arch/x86/mm/fault.c:do_user_addr_fault()
// for an access by thread w: first lock_vma_under_rcu; a VMA that fails the
// access check (AccessError, with w's PKRU) under its lock gives its signal
// at once. A write fault on private memory that has no
// anon_vma yet cannot be handled under the VMA lock alone (vmf_anon_prepare
// returns VM_FAULT_RETRY): it drops the VMA lock and falls back, as does a
// failed VMA lock, to the mmap read lock (lock_mm_and_find_vma). It returns
// the VMA, locked by its VMA lock (vmaLocked) or by the mmap read lock.
func (m *MM) lockForAccess(w locking.Waiter, addr uint64, code FaultCode) (v *VMA, vmaLocked bool, err error) {
	pkru := pkruValue(w)
	write := code&X86_PF_WRITE != 0
	if v = m.lockVMAUnderRCU(rcu.ThreadOf(w), addr); v != nil {
		if err := m.AccessError(v, code, pkru); err != nil {
			m.VMAEndRead(v)
			return nil, false, err
		}
		if !write || v.Flags&VM_MAYSHARE != 0 || v.Name != "" || m.hasAnonVMA(v) {
			return v, true, nil
		}
		m.VMAEndRead(v) // VM_FAULT_RETRY
	}
	m.MmapReadLock(w)
	v = m.mt.Load(addr)
	if err := m.AccessError(v, code, pkru); err != nil {
		m.MmapReadUnlock()
		return nil, false, err
	}
	return v, false, nil
}

// unlockAccess drops what lockForAccess took.
func (m *MM) unlockAccess(v *VMA, vmaLocked bool) {
	if vmaLocked {
		m.VMAEndRead(v)
	} else {
		m.MmapReadUnlock()
	}
}

// hasAnonVMA reads v.AnonVMA under page_table_lock, which serialises
// anon_vma_prepare among faults.
func (m *MM) hasAnonVMA(v *VMA) bool {
	m.ptLock.Lock()
	defer m.ptLock.Unlock()
	return v.AnonVMA != nil
}

// VMAStartWrite is vma_start_write() for callers outside mm that modify a
// VMA under the mmap write lock (and for tests that drive the write lock).
func (m *MM) VMAStartWrite(v *VMA) { m.vmaStartWrite(v) }
