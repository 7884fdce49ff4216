package locking

import (
	"time"

	"mmlab/sched"
)

// rwsemMaxSpinReaders caps the reader count in the spin threshold
// (rwsem_rspin_threshold's 30 readers).
const rwsemMaxSpinReaders = 30

// canSpinOnOwner mirrors rwsem_can_spin_on_owner(): a writer may spin
// unless a writer before it gave up on the readers (ownerNonspinnable).
// Model choices the kernel does not make: no spinning in a deterministic
// run (time is virtual there, and a spin would add decisions to every
// recorded schedule), nor while a writer owns the lock (the owner word
// does not say which thread, so owner_on_cpu cannot be asked); and
// need_resched() is not checked (a model thread cannot see it).
func (s *RWSem) canSpinOnOwner() bool {
	if sched.Active() {
		return false
	}
	return s.owner.Load()&ownerNonspinnable == 0 && s.count.Load()&rwsemWriterLocked == 0
}

// optimisticSpin mirrors rwsem_optimistic_spin() for a reader-owned lock:
// take the lock the moment it is free of readers, writers and a handoff,
// without queueing (so new readers keep their fast path meanwhile), or give
// up once the readers have kept it for rwsem_rspin_threshold ((20 +
// readers) / 2 µs, checked every 16 turns as the kernel does), marking the
// lock non-spinnable. It also stops when a writer owns the lock (see
// canSpinOnOwner). Only one writer spins at a time; a model choice: the
// kernel queues the others on the spin queue (osq_lock), the model queues
// them on the wait list at once. Reports whether the lock was taken.
func (s *RWSem) optimisticSpin() bool {
	if !s.spinner.CompareAndSwap(false, true) {
		return false
	}
	defer s.spinner.Store(false)
	var deadline time.Time
	readerPhase := false
	for loop := 0; ; loop++ {
		if h := s.hooks; h != nil && h.spin != nil {
			h.spin()
		}
		owner := s.owner.Load()
		if owner&ownerNonspinnable != 0 {
			return false
		}
		// rwsem_try_write_lock_unqueued
		count := s.count.Load()
		for count&(rwsemLockMask|rwsemFlagHandoff) == 0 {
			if s.count.CompareAndSwap(count, count|rwsemWriterLocked) {
				s.setOwner()
				return true
			}
			count = s.count.Load()
		}
		if count&rwsemWriterLocked != 0 {
			return false // OWNER_WRITER: see canSpinOnOwner
		}
		if owner&ownerReader == 0 {
			readerPhase = false // OWNER_NULL: spin on
			continue
		}
		// OWNER_READER: the threshold starts when the readers' phase does.
		if !readerPhase {
			readerPhase, loop = true, 0
			deadline = time.Now().Add(rspinThreshold(count))
		} else if loop&0xf == 0 && time.Now().After(deadline) {
			s.setNonspinnable()
			return false
		}
	}
}

// rspinThreshold mirrors rwsem_rspin_threshold(): how long a writer spins
// on the readers of count.
func rspinThreshold(count int64) time.Duration {
	readers := min(rwsemReaders(count), rwsemMaxSpinReaders)
	return time.Duration(20+readers) * time.Microsecond / 2
}

// setNonspinnable mirrors rwsem_set_nonspinnable(): set ownerNonspinnable
// if readers still own the lock.
func (s *RWSem) setNonspinnable() {
	for {
		old := s.owner.Load()
		if old&ownerReader == 0 || old&ownerNonspinnable != 0 {
			return
		}
		if s.owner.CompareAndSwap(old, old|ownerNonspinnable) {
			return
		}
	}
}

// clearNonspinnable mirrors clear_nonspinnable(), when the readers are
// gone and the queue is woken.
func (s *RWSem) clearNonspinnable() {
	for {
		old := s.owner.Load()
		if old&ownerNonspinnable == 0 || s.owner.CompareAndSwap(old, old&^ownerNonspinnable) {
			return
		}
	}
}
