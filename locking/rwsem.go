package locking

import (
	"sync"
	"sync/atomic"
	"time"

	"mmlab/errno"
	"mmlab/locking/lockrank"
	"mmlab/sched"
	"mmlab/smp"
)

// The count word, as in kernel/locking/rwsem.c on 64-bit: bit 0 writer
// locked, bit 1 waiters present, bit 2 handoff, bits 8-62 reader count,
// bit 63 read fail.
const (
	rwsemWriterLocked  int64 = 1 << 0
	rwsemFlagWaiters   int64 = 1 << 1
	rwsemFlagHandoff   int64 = 1 << 2
	rwsemFlagReadFail  int64 = -1 << 63
	rwsemReaderShift         = 8
	rwsemReaderBias    int64 = 1 << rwsemReaderShift
	rwsemReaderMask          = ^(rwsemReaderBias - 1)
	rwsemWriterMask          = rwsemWriterLocked
	rwsemLockMask            = rwsemWriterMask | rwsemReaderMask
	rwsemReadFailedMsk       = rwsemWriterMask | rwsemFlagWaiters | rwsemFlagHandoff | rwsemFlagReadFail
)

// RWSemWaitTimeout is RWSEM_WAIT_TIMEOUT (HZ/250 jiffies, 4 ms at HZ=250):
// a waiter that has been queued this long may set the handoff bit, which
// stops readers from stealing the lock from it.
const RWSemWaitTimeout = 4 * time.Millisecond

// maxReadersWakeup is MAX_READERS_WAKEUP: at most this many readers are
// woken by one wake-up.
const maxReadersWakeup = 256

// The owner word's flags (the kernel's sem->owner without the task
// pointer). ownerReader is RWSEM_READER_OWNED: a hint that readers hold the
// lock; like the kernel's (without CONFIG_DEBUG_RWSEMS) it stays set after
// the last reader leaves, until a writer takes the lock.
// ownerNonspinnable is RWSEM_NONSPINNABLE: a writer gave up spinning on the
// readers (rwsem_set_nonspinnable), so later writers queue at once; readers
// keep it, a writer that takes the lock and a reader that wakes the queue
// clear it.
const (
	ownerReader       uint32 = 1 << 0
	ownerNonspinnable uint32 = 1 << 1
)

type waitKind uint8

const (
	waitingForRead waitKind = iota
	waitingForWrite
)

type wakeType uint8

const (
	wakeAny       wakeType = iota // RWSEM_WAKE_ANY: wake whatever is at the head
	wakeReaders                   // RWSEM_WAKE_READERS: wake readers only
	wakeReadOwned                 // RWSEM_WAKE_READ_OWNED: the waker holds the read lock
)

// rwsemWaiter mirrors struct rwsem_waiter.
type rwsemWaiter struct {
	next, prev *rwsemWaiter // wait list links; protected by RWSem.waitLock
	task       Waiter
	kind       waitKind
	timeout    time.Time // when this waiter may set the handoff bit
	handoffSet bool      // protected by RWSem.waitLock
	// granted is the kernel's "waiter.task == NULL": a reader was given
	// the lock by rwsemMarkWake and removed from the list.
	granted atomic.Bool
	wake    chan struct{} // one slot; see wakeUp
}

// RWSem is a reader-writer semaphore with the behaviour of the kernel's
// struct rw_semaphore (kernel/locking/rwsem.c): a FIFO wait list; once anyone
// waits, new readers do not enter through the fast path; a reader may steal
// the lock only while it is free and no handoff is pending; a release wakes
// either the first waiter if it is a writer or every queued reader (up to
// 256) if it is a reader; a waiter that has been first for RWSemWaitTimeout
// sets the handoff bit. A writer that cannot take the lock first spins on
// readers that own it, for a few microseconds (optimisticSpin), then queues.
//
// The zero value is an unlocked semaphore named "rwsem".
type RWSem struct {
	count        smp.Int64    // the kernel's sem->count (bits above); a locked RMW or READ_ONCE, its own line
	acquisitions atomic.Int64 // LockStats.Acquisitions
	// owner is the ownerReader hint, or 0 (the kernel's sem->owner
	// flags). It sits on a cache line of its own, away from count, as
	// mmap_lock's two hot fields do in struct mm_struct
	// (include/linux/mm_types.h: "its two hot fields 'count' and 'owner'
	// sit in 2 different cachelines"); other rwsems of the kernel have
	// them on one line (model choice: one layout for all). wait_lock
	// follows it on its line (ownerLine), as in struct rw_semaphore.
	_         [64 - 32]byte
	owner     smp.Uint32
	ownerLine smp.Line

	lockName

	// spinner is the optimistic spin queue (sem->osq), reduced to one
	// spinning writer at a time (optimisticSpin).
	spinner atomic.Bool

	// waitLock is the kernel's sem->wait_lock. It protects head, tail and
	// every queued waiter's links and handoffSet, and serialises the
	// changes of the WAITERS and HANDOFF bits. It is innermost: nothing is
	// taken while it is held.
	waitLock   spinLock
	head, tail *rwsemWaiter
	nwait      int

	stats waitStats

	// now is the clock of the handoff timeout and of the wait accounting:
	// nil means the model's clock, sched.Now (virtual in a deterministic
	// run). Set before the lock is shared.
	now func() time.Time

	// hooks are the lock's test hooks, set only from export_test.go
	// before the lock is shared; nil outside tests.
	hooks *rwsemHooks
}

// NewRWSem returns an unlocked semaphore; name appears in stats and in
// BlockRecorder calls.
func NewRWSem(name string) *RWSem {
	s := &RWSem{}
	s.SetName(name)
	return s
}

// SetName sets the name used in stats and BlockRecorder calls, and names
// the shared words name.count and name.owner (package smp). Call it
// before the lock is shared.
func (s *RWSem) SetName(name string) {
	s.lockName.SetName(name)
	s.count.Init(name + ".count")
	s.ownerLine.SetName(name + ".owner")
	s.owner.InitOn(&s.ownerLine, "owner")
	s.waitLock.word.InitOn(&s.ownerLine, "wait_lock")
}

// spinLock is a raw_spinlock_t as its cache line sees it: a host mutex
// gives the exclusion (no model thread is preempted while it holds one),
// and its lock word (package smp) the kernel's accesses:
// queued_spin_lock()'s cmpxchg, queued_spin_unlock()'s release store.
type spinLock struct {
	mu   sync.Mutex
	word smp.Uint32 // 1 while held; the accesses alone matter
}

func (l *spinLock) Lock() {
	l.mu.Lock()
	l.word.CompareAndSwap(0, 1)
}

func (l *spinLock) Unlock() {
	l.word.Store(0)
	l.mu.Unlock()
}

// Name returns the lock's name, "rwsem" if none was set.
func (s *RWSem) Name() string { return s.nameOr("rwsem") }

// lockName is the name of a lock (RWSem, PercpuRWSem) in stats and in
// BlockRecorder calls, and its class in the lock order (package
// lockrank): set before the lock is shared, never changed afterwards.
type lockName struct {
	name  string
	class lockrank.Class
}

// SetName sets the name used in stats and BlockRecorder calls. Call it
// before the lock is shared.
func (n *lockName) SetName(name string) { n.name = name }

// SetClass sets the lock's class in lockrank.Order (lockdep's
// lockdep_set_class), which a deterministic run built with -tags
// invariants checks each acquisition against. Call it before the lock is
// shared. Without it the lock is lockrank.None, never checked.
func (n *lockName) SetClass(c lockrank.Class) { n.class = c }

// nameOr returns the name, or def if none was set.
func (n *lockName) nameOr(def string) string {
	if n.name == "" {
		return def
	}
	return n.name
}

func (s *RWSem) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return sched.Now()
}

// setReaderOwned mirrors rwsem_set_reader_owned(): every reader stores the
// owner word (the kernel stores current | RWSEM_READER_OWNED, keeping
// RWSEM_NONSPINNABLE), so each read acquisition writes its cache line, on
// every CPU.
func (s *RWSem) setReaderOwned() { s.owner.Store(ownerReader | s.owner.Load()&ownerNonspinnable) }

// setOwner mirrors rwsem_set_owner() and rwsem_clear_owner(), which store
// the owner word each time: the hint records only "not reader-owned", and
// drops ownerNonspinnable.
func (s *RWSem) setOwner() { s.owner.Store(0) }

// DownRead takes the lock for reading, sleeping uninterruptibly (D state)
// while a writer holds it or, mostly, while anyone waits. w may be nil (no
// accounting on the task). Mirrors kernel/locking/rwsem.c:down_read().
func (s *RWSem) DownRead(w Waiter) {
	s.downRead(w, false)
}

// DownReadKillable is DownRead, but a fatal signal on w while it waits
// removes it from the queue and returns errno.EINTR. Mirrors
// down_read_killable().
func (s *RWSem) DownReadKillable(w Waiter) error {
	return s.downRead(w, true)
}

// downRead mirrors __down_read_common().
func (s *RWSem) downRead(w Waiter, killable bool) error {
	if sched.Active() {
		s.detAt("down_read")
	}
	// rwsem_read_trylock(): add a reader bias; it is ours if none of
	// WRITER, WAITERS, HANDOFF, READFAIL is set.
	count := s.count.Add(rwsemReaderBias)
	if count&rwsemReadFailedMsk == 0 {
		s.setReaderOwned()
		s.acquired(false, 0, false)
		return nil
	}
	if err := s.downReadSlowpath(count, w, killable); err != nil {
		return err
	}
	s.acquired(false, 0, false)
	return nil
}

// acquired counts an acquisition and tells a deterministic run: at
// subclass sub (DownWriteNested), or by a trylock (try), which the lock
// order does not constrain.
func (s *RWSem) acquired(write bool, sub uint8, try bool) {
	s.acquisitions.Add(1)
	if sched.Active() {
		s.detAcquired(write, sub, try)
	}
}

func (s *RWSem) detAt(op string) { sched.At(op, s.Name()) }

func (s *RWSem) detAcquired(write bool, sub uint8, try bool) {
	sched.AcquiredClass(s, s.Name(), write, s.class, sub, try)
}

// released tells a deterministic run, at the preemption point after a
// release (op names it).
func (s *RWSem) released(op string) {
	if sched.Active() {
		s.detReleased(op)
	}
}

func (s *RWSem) detReleased(op string) {
	sched.Released(s)
	sched.At(op, s.Name())
}

// downReadSlowpath mirrors rwsem_down_read_slowpath(). On entry the
// caller's reader bias is in the count.
func (s *RWSem) downReadSlowpath(count int64, w Waiter, killable bool) error {
	adjustment := -rwsemReaderBias
	rcnt := count >> rwsemReaderShift

	// Don't let a stream of readers starve a sleeping writer: no stealing
	// when the lock is very likely owned by other readers.
	mustQueue := s.owner.Load()&ownerReader != 0 && rcnt > 1 && count&rwsemWriterLocked == 0

	// Reader optimistic lock stealing: the lock is free of writers and no
	// handoff is pending, even though waiters exist.
	if !mustQueue && count&(rwsemWriterLocked|rwsemFlagHandoff) == 0 {
		s.setReaderOwned()
		// The first reader wakes the readers at the head of the queue.
		if rcnt == 1 && count&rwsemFlagWaiters != 0 {
			s.wake(wakeReadOwned)
		}
		return nil
	}

	start := s.clock()
	waiter := s.newWaiter(w, waitingForRead)
	s.waitLock.Lock()
	if s.head == nil {
		// Nobody queued and no writer: our bias already holds the lock.
		if s.count.Load()&rwsemWriterMask == 0 {
			s.waitLock.Unlock()
			s.setReaderOwned()
			return nil
		}
		adjustment += rwsemFlagWaiters
	}
	s.addWaiter(waiter)
	// We are now waiting on the lock, no longer actively locking.
	count = s.count.Add(adjustment)
	q := s.condWakeWaiter(count, nil)
	s.waitLock.Unlock()
	wakeAll(q)

	fatal := killableFatal(w, killable)
	for !waiter.granted.Load() {
		if closed(fatal) {
			s.waitLock.Lock()
			if !waiter.granted.Load() {
				return s.giveUpLocked(waiter, start) // releases waitLock
			}
			// Granted just before the signal was seen: ordered by
			// waitLock against markWake: we own the lock.
			s.waitLock.Unlock()
			break
		}
		sleep(w, func() { sched.Wait(s, s.Name(), waiter.wake, fatal) })
	}
	s.stats.record(s.Name(), w, s.clock().Sub(start))
	return nil
}

// newWaiter returns the wait-list entry of task w, which may set the
// handoff bit once it has waited RWSemWaitTimeout (the set-up of struct
// rwsem_waiter in rwsem_down_read_slowpath() and rwsem_down_write_slowpath()).
func (s *RWSem) newWaiter(w Waiter, kind waitKind) *rwsemWaiter {
	return &rwsemWaiter{
		task:    w,
		kind:    kind,
		timeout: s.clock().Add(RWSemWaitTimeout),
		wake:    make(chan struct{}, 1),
	}
}

// killableFatal returns the channel a waiter watches for a fatal signal:
// w's for a killable sleep (TASK_KILLABLE), nil (never) for an
// uninterruptible one.
func killableFatal(w Waiter, killable bool) <-chan struct{} {
	if !killable {
		return nil
	}
	return fatalChan(w)
}

// giveUpLocked takes a waiter that saw a fatal signal off the queue, as the
// out_nolock paths of rwsem_down_read_slowpath() and
// rwsem_down_write_slowpath() do (rwsem_del_wake_waiter()), accounts the wait
// since start as interrupted, and returns errno.EINTR. Caller holds waitLock;
// it is released on return.
func (s *RWSem) giveUpLocked(waiter *rwsemWaiter, start time.Time) error {
	s.delWakeWaiter(waiter)
	s.stats.interrupted.Add(1)
	s.stats.record(s.Name(), waiter.task, s.clock().Sub(start))
	return errno.EINTR
}

// DownReadTrylock takes the lock for reading if no writer holds it and no
// one waits or has asked for a handoff; it never sleeps and fails without
// side effects. Mirrors down_read_trylock().
func (s *RWSem) DownReadTrylock() bool {
	if sched.Active() {
		s.detAt("down_read_trylock")
	}
	tmp := s.count.Load()
	for tmp&rwsemReadFailedMsk == 0 {
		if s.count.CompareAndSwap(tmp, tmp+rwsemReaderBias) {
			s.setReaderOwned()
			s.acquired(false, 0, true)
			return true
		}
		tmp = s.count.Load()
	}
	return false
}

// UpRead releases a read lock; the last reader out wakes the queue. Mirrors
// up_read().
func (s *RWSem) UpRead() {
	tmp := s.count.Add(-rwsemReaderBias)
	if rwsemReaders(tmp+rwsemReaderBias) == 0 {
		panic("locking: UpRead of " + s.Name() + " not read-locked")
	}
	if tmp&(rwsemLockMask|rwsemFlagWaiters) == rwsemFlagWaiters {
		s.clearNonspinnable()
		s.wake(wakeAny)
	}
	s.released("up_read")
}

// DownWrite takes the lock for writing, sleeping uninterruptibly. Mirrors
// down_write().
func (s *RWSem) DownWrite(w Waiter) {
	s.downWrite(w, false, 0)
}

// DownWriteNested is DownWrite of a lock of a class the caller already
// holds, at lockdep subclass sub (> the held one's): a fork child's
// mmap_lock inside its parent's. It differs from DownWrite only in what a
// run built with -tags invariants checks. Mirrors down_write_nested().
func (s *RWSem) DownWriteNested(w Waiter, sub uint8) {
	s.downWrite(w, false, sub)
}

// DownWriteKillable is DownWrite, but a fatal signal on w while it waits
// removes it from the queue (waking the waiters behind it if it was first)
// and returns errno.EINTR. Mirrors down_write_killable().
func (s *RWSem) DownWriteKillable(w Waiter) error {
	return s.downWrite(w, true, 0)
}

func (s *RWSem) downWrite(w Waiter, killable bool, sub uint8) error {
	if sched.Active() {
		s.detAt("down_write")
	}
	if !s.count.CompareAndSwap(0, rwsemWriterLocked) {
		if err := s.downWriteSlowpath(w, killable); err != nil {
			return err
		}
	} else {
		s.setOwner()
	}
	s.acquired(true, sub, false)
	return nil
}

// downWriteSlowpath mirrors rwsem_down_write_slowpath(): spin on the
// owner if it can (rwsem_can_spin_on_owner, rwsem_optimistic_spin), else
// queue and sleep until the lock is ours. A queued writer that set the
// handoff bit does not spin again (rwsem_spin_on_owner on a writer owner is
// left out, see optimisticSpin).
func (s *RWSem) downWriteSlowpath(w Waiter, killable bool) error {
	if s.canSpinOnOwner() && s.optimisticSpin() {
		return nil
	}
	start := s.clock()
	waiter := s.newWaiter(w, waitingForWrite)
	s.waitLock.Lock()
	s.addWaiter(waiter)
	if s.head != waiter {
		q := s.condWakeWaiter(s.count.Load(), nil)
		if len(q) > 0 {
			s.waitLock.Unlock()
			wakeAll(q)
			s.waitLock.Lock()
		}
	} else {
		s.count.Or(rwsemFlagWaiters)
	}

	fatal := killableFatal(w, killable)
	for !s.tryWriteLock(waiter) {
		s.waitLock.Unlock()
		if closed(fatal) {
			s.waitLock.Lock()
			return s.giveUpLocked(waiter, start) // releases waitLock
		}
		if h := s.hooks; h != nil && h.writer != nil {
			h.writer(writerSleeps)
		}
		sleep(w, func() { sched.Wait(s, s.Name(), waiter.wake, fatal) })
		if h := s.hooks; h != nil && h.writer != nil {
			h.writer(writerWoken)
		}
		s.waitLock.Lock()
	}
	s.waitLock.Unlock()
	s.stats.record(s.Name(), w, s.clock().Sub(start))
	return nil
}

// DownWriteTrylock takes the lock for writing only if nobody holds it and
// nobody waits. Mirrors down_write_trylock().
func (s *RWSem) DownWriteTrylock() bool {
	if sched.Active() {
		s.detAt("down_write_trylock")
	}
	if s.count.CompareAndSwap(0, rwsemWriterLocked) {
		s.setOwner()
		s.acquired(true, 0, true)
		return true
	}
	return false
}

// UpWrite releases the write lock and wakes the queue. Mirrors up_write().
func (s *RWSem) UpWrite() {
	s.setOwner()
	tmp := s.count.Add(-rwsemWriterLocked) + rwsemWriterLocked
	if tmp&rwsemWriterLocked == 0 {
		panic("locking: UpWrite of " + s.Name() + " not write-locked")
	}
	if tmp&rwsemFlagWaiters != 0 {
		s.wake(wakeAny)
	}
	s.released("up_write")
}

// DowngradeWrite turns the caller's write lock into a read lock and wakes
// the readers at the head of the queue. Mirrors downgrade_write().
func (s *RWSem) DowngradeWrite() {
	tmp := s.count.Add(-rwsemWriterLocked+rwsemReaderBias) - (-rwsemWriterLocked + rwsemReaderBias)
	if tmp&rwsemWriterLocked == 0 {
		panic("locking: DowngradeWrite of " + s.Name() + " not write-locked")
	}
	s.setReaderOwned()
	if tmp&rwsemFlagWaiters != 0 {
		s.wake(wakeReadOwned)
	}
	if sched.Active() {
		sched.Released(s)
		sched.AcquiredClass(s, s.Name(), false, s.class, 0, true) // the same hold: not a new acquisition
		sched.At("downgrade_write", s.Name())
	}
}

// IsContended reports whether anyone waits for the lock. Mirrors
// rwsem_is_contended().
func (s *RWSem) IsContended() bool {
	return s.count.Load()&rwsemFlagWaiters != 0
}

// IsWriteLocked reports whether a writer holds the lock.
func (s *RWSem) IsWriteLocked() bool {
	return s.count.Load()&rwsemWriterLocked != 0
}

// IsLocked reports whether a writer or a reader holds the lock (a reader
// on its way into the slow path counts for a moment). Mirrors
// rwsem_is_locked().
func (s *RWSem) IsLocked() bool {
	return s.count.Load()&rwsemLockMask != 0
}

// Waiters returns how many tasks are queued on the lock.
func (s *RWSem) Waiters() int {
	s.waitLock.Lock()
	defer s.waitLock.Unlock()
	return s.nwait
}

// QueuedWaiter describes one entry of the wait list.
type QueuedWaiter struct {
	Task  Waiter
	Write bool // waiting to write (else to read)
}

// QueueSnapshot returns the wait list, first waiter first.
func (s *RWSem) QueueSnapshot() []QueuedWaiter {
	s.waitLock.Lock()
	defer s.waitLock.Unlock()
	q := make([]QueuedWaiter, 0, s.nwait)
	for w := s.head; w != nil; w = w.next {
		q = append(q, QueuedWaiter{Task: w.task, Write: w.kind == waitingForWrite})
	}
	return q
}

// Stats returns the lock's counters.
func (s *RWSem) Stats() LockStats {
	st := LockStats{Acquisitions: s.acquisitions.Load()}
	s.stats.fill(&st)
	return st
}

// ResetStats zeroes the lock's counters.
func (s *RWSem) ResetStats() {
	s.acquisitions.Store(0)
	s.stats.reset()
}

// addWaiter mirrors rwsem_add_waiter(). Caller holds waitLock.
func (s *RWSem) addWaiter(w *rwsemWaiter) {
	w.prev = s.tail
	if s.tail != nil {
		s.tail.next = w
	} else {
		s.head = w
	}
	s.tail = w
	s.nwait++
}

// unlink removes w from the wait list. Caller holds waitLock.
func (s *RWSem) unlink(w *rwsemWaiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		s.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		s.tail = w.prev
	}
	w.next, w.prev = nil, nil
	s.nwait--
}

// delWaiter mirrors rwsem_del_waiter(): it reports whether the list is
// still non-empty. Caller holds waitLock.
func (s *RWSem) delWaiter(w *rwsemWaiter) bool {
	s.unlink(w)
	if s.head != nil {
		return true
	}
	s.count.And(^(rwsemFlagHandoff | rwsemFlagWaiters))
	return false
}

// delWakeWaiter mirrors rwsem_del_wake_waiter(): remove a waiter that gives
// up and, if it was first, wake those behind it. Caller holds waitLock; it is
// released on return.
func (s *RWSem) delWakeWaiter(w *rwsemWaiter) {
	first := s.head == w
	var q []*rwsemWaiter
	if s.delWaiter(w) && first {
		q = s.markWake(wakeAny, q)
	}
	s.waitLock.Unlock()
	wakeAll(q)
}

// condWakeWaiter mirrors rwsem_cond_wake_waiter(). Caller holds waitLock.
func (s *RWSem) condWakeWaiter(count int64, q []*rwsemWaiter) []*rwsemWaiter {
	if count&rwsemWriterMask != 0 {
		return q
	}
	wt := wakeAny
	if count&rwsemReaderMask != 0 {
		wt = wakeReaders
	} else {
		s.clearNonspinnable()
	}
	return s.markWake(wt, q)
}

// wake mirrors rwsem_wake() with wakeAny. With wakeReadOwned it is the
// wake-up of the readers at the head of the queue by a task that holds the
// read lock, in downgrade_write() and in rwsem_down_read_slowpath()'s lock
// stealing.
func (s *RWSem) wake(wt wakeType) {
	var q []*rwsemWaiter
	s.waitLock.Lock()
	if s.head != nil {
		q = s.markWake(wt, q)
	}
	s.waitLock.Unlock()
	wakeAll(q)
}

// markWake mirrors rwsem_mark_wake(): if the first waiter is a writer, wake
// only it (for wakeAny); if it is a reader, grant the lock to every queued
// reader, up to maxReadersWakeup, including readers behind writers, which
// keep their places. Woken readers leave the list already holding the lock.
// It returns q with the waiters to wake appended. Caller holds waitLock and
// the list is not empty.
func (s *RWSem) markWake(wt wakeType, q []*rwsemWaiter) []*rwsemWaiter {
	first := s.head
	if first.kind == waitingForWrite {
		if wt == wakeAny {
			q = append(q, first)
		}
		return q
	}
	// No reader wake-up if there are too many of them already.
	if s.count.Load() < 0 {
		return q
	}
	var adjustment int64
	if wt != wakeReadOwned {
		// Grant the first reader before counting, so that a writer that
		// stole the lock makes us back out early.
		adjustment = rwsemReaderBias
		old := s.count.Add(adjustment) - adjustment
		if old&rwsemWriterMask != 0 {
			// Waited "too" long for writers: request a handoff.
			if s.clock().After(first.timeout) {
				if old&rwsemFlagHandoff == 0 {
					adjustment -= rwsemFlagHandoff
				}
				first.handoffSet = true
			}
			s.count.Add(-adjustment)
			return q
		}
		s.setReaderOwned()
	}

	// First pass: take the readers off the list and count them.
	var woken int64
	var readers []*rwsemWaiter
	for w := s.head; w != nil; {
		next := w.next
		if w.kind == waitingForRead {
			s.unlink(w)
			readers = append(readers, w)
			woken++
			if woken >= maxReadersWakeup {
				break
			}
		}
		w = next
	}
	adjustment = woken*rwsemReaderBias - adjustment
	old := s.count.Load()
	if s.head == nil {
		adjustment -= rwsemFlagWaiters
		if old&rwsemFlagHandoff != 0 {
			adjustment -= rwsemFlagHandoff
		}
	} else if woken > 0 {
		// A reader got the lock; writers need not be forced to hand off.
		if old&rwsemFlagHandoff != 0 {
			adjustment -= rwsemFlagHandoff
		}
	}
	if adjustment != 0 {
		s.count.Add(adjustment)
	}
	// Second pass: the readers hold the lock now; mark them granted.
	for _, w := range readers {
		w.granted.Store(true)
		q = append(q, w)
	}
	return q
}

// tryWriteLock mirrors rwsem_try_write_lock(): take the lock for the queued
// writer w, or set the handoff bit if w has waited past its timeout. On
// success w leaves the list. Caller holds waitLock.
func (s *RWSem) tryWriteLock(w *rwsemWaiter) bool {
	first := s.head
	count := s.count.Load()
	var n int64
	for {
		hasHandoff := count&rwsemFlagHandoff != 0
		// Honour the handoff bit: yield only to the first waiter that set it.
		if hasHandoff && first.handoffSet && w != first {
			return false
		}
		n = count
		if count&rwsemLockMask != 0 {
			// Any waiter that has waited too long may set the handoff bit.
			if hasHandoff || !s.clock().After(w.timeout) {
				return false
			}
			n |= rwsemFlagHandoff
		} else {
			n |= rwsemWriterLocked
			n &^= rwsemFlagHandoff
			if s.nwait == 1 {
				n &^= rwsemFlagWaiters
			}
		}
		if s.count.CompareAndSwap(count, n) {
			break
		}
		count = s.count.Load()
	}
	if n&rwsemFlagHandoff != 0 {
		first.handoffSet = true
		return false
	}
	s.unlink(w)
	s.setOwner()
	return true
}

// rwsemReaders returns the reader count field of a count word.
func rwsemReaders(count int64) int64 {
	return count >> rwsemReaderShift & (1<<55 - 1)
}

func wakeAll(q []*rwsemWaiter) {
	for _, w := range q {
		wakeUp(w.wake)
	}
}

// hookEvent is where a sleeping writer pauses under hooks.writer.
type hookEvent int

const (
	writerSleeps hookEvent = iota // failed to take the lock, about to sleep
	writerWoken                   // woken, about to retry
)

// rwsemHooks are an RWSem's test hooks (RWSem.hooks).
type rwsemHooks struct {
	// writer is called by a sleeping writer at the events above.
	writer func(e hookEvent)
	// spin is called by a writer at each turn of its optimistic spin.
	spin func()
}
