package locking

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"mmlab/sched"
	"mmlab/smp"
)

// percpuShards is the number of reader counters: one per CPU of the
// largest simulated machine (sched.MaxSimCPUs), as the kernel's
// read_count has one per possible CPU (alloc_percpu()), so no two
// simulated CPUs share one. A task on model CPU c uses shard c %
// percpuShards; a task with no CPU uses a random one, or in a
// deterministic run the CPU of the running thread. The counters of CPUs
// a simulated machine lacks are never touched (SetName names only the
// machine's), and a line that no CPU holds costs an access nothing in
// package smp, so a writer's sum there pays for the machine's CPUs only,
// as readers_active_check() sums its possible CPUs'.
const percpuShards = sched.MaxSimCPUs

// percpuShard is one CPU's read_count. The 128-byte stride keeps two
// shards' counters off each other's cache line (and line pair, which the
// adjacent-line prefetcher fetches together) whatever the struct's alignment.
type percpuShard struct {
	readers      smp.Int64    // this CPU's read_count (this_cpu_inc/dec, a locked RMW in the model); only the sum means anything
	acquisitions atomic.Int64 // this CPU's share of LockStats.Acquisitions
	_            [128 - 32]byte
}

// percpuWaiter is a wait_queue_entry of PercpuRWSem.waiters.
type percpuWaiter struct {
	next   *percpuWaiter // protected by PercpuRWSem.waitLock
	reader bool          // the kernel's WQ_FLAG_CUSTOM
	task   Waiter
	// granted is the kernel's "wq_entry.private == NULL": the waker took
	// the lock on this waiter's behalf and removed it from the queue.
	granted atomic.Bool
	wake    chan struct{}
}

// PercpuRWSem is a reader-writer semaphore whose readers are cheap, with the
// behaviour of the kernel's struct percpu_rw_semaphore
// (kernel/locking/percpu-rwsem.c), used for uprobes' dup_mmap_sem. A reader
// increments its CPU's counter and is in unless a writer has set block. A
// writer sets block (from then on new readers queue), then waits,
// uninterruptibly, for the counters to sum to zero. Readers and writers that
// find block set queue in one FIFO list; UpWrite wakes readers from its head
// until it has woken one writer (which gets the lock exclusively).
//
// The kernel's rcu_sync (RCUSync, set with SetRCUSync) lets its reader fast
// path skip the memory barrier and the look at block while no writer has
// been around for a grace period, and makes a writer after an idle period
// wait for a grace period before it sets block. The model keeps the
// writer's side: the wait, and the states that say which path readers are
// on (ReaderFastPath). Its readers always do what the kernel's slow-path
// trylock does (increment, then check block), a model choice: a reader
// that is not a model thread is not waited for by the model's grace
// period, and Go's atomics are sequentially consistent anyway.
//
// The zero value is an unlocked semaphore named "percpu-rwsem", without
// rcu_sync.
type PercpuRWSem struct {
	shards [percpuShards]percpuShard
	block  smp.Int32 // 1 while a writer holds or is taking the lock (sem->block; READ_ONCE, xchg)

	// writer is the kernel's rcuwait: the writer waiting for readers to
	// drain publishes its wake-up channel here.
	writer smp.Pointer[chan struct{}]

	lockName
	rss *RCUSync // rcu_sync; nil: none. Set before the lock is shared

	// waitLock is the kernel's waiters.lock: it protects head, tail and
	// nwait. Innermost: nothing is taken while it is held.
	waitLock   sync.Mutex
	head, tail *percpuWaiter
	nwait      int

	stats waitStats
}

// NewPercpuRWSem returns an unlocked per-CPU semaphore of a machine of
// ncpu CPUs; name appears in stats and in BlockRecorder calls.
func NewPercpuRWSem(name string, ncpu int) *PercpuRWSem {
	s := &PercpuRWSem{}
	s.SetName(name, ncpu)
	return s
}

// SetName sets the name used in stats and BlockRecorder calls, and names
// the shared words (package smp): name.read_count[i] of each of the
// machine's ncpu CPUs (the counters a simulated machine's CPUs use; the
// others stay unnamed), name.block, name.writer. Call it before the lock
// is shared.
func (s *PercpuRWSem) SetName(name string, ncpu int) {
	s.lockName.SetName(name)
	for i := range min(ncpu, percpuShards) {
		s.shards[i].readers.Init(name + ".read_count[" + strconv.Itoa(i) + "]")
	}
	s.block.Init(name + ".block")
	s.writer.Init(name + ".writer")
}

// Name returns the lock's name, "percpu-rwsem" if none was set.
func (s *PercpuRWSem) Name() string { return s.nameOr("percpu-rwsem") }

func (s *PercpuRWSem) shard(w Waiter) *percpuShard {
	if w != nil {
		if cpu := w.CPU(); cpu >= 0 {
			return &s.shards[cpu%percpuShards]
		}
	}
	if t := sched.Current(); t != nil {
		return &s.shards[t.CPU()%percpuShards]
	}
	return &s.shards[rand.Uint32()%percpuShards]
}

// DownRead takes the lock for reading, sleeping uninterruptibly while a
// writer holds or waits for it. w (may be nil) chooses the counter and gets
// the blocked time. Mirrors percpu_down_read().
func (s *PercpuRWSem) DownRead(w Waiter) {
	if sched.Active() {
		s.detAt("percpu_down_read")
	}
	sh := s.shard(w)
	if s.readTrylock(sh) {
		s.acquired(sh, false, false)
		return
	}
	start := sched.Now()
	s.wait(w, true)
	s.acquired(sh, false, false)
	s.stats.record(s.Name(), w, sched.Since(start))
}

// acquired counts an acquisition on sh and tells a deterministic run (try:
// by a trylock, which the lock order does not constrain).
func (s *PercpuRWSem) acquired(sh *percpuShard, write, try bool) {
	sh.acquisitions.Add(1)
	if sched.Active() {
		sched.AcquiredClass(s, s.Name(), write, s.class, 0, try)
	}
}

// detAt, detReleased: a deterministic run's preemption point op, and the
// release before it.
func (s *PercpuRWSem) detAt(op string) { sched.At(op, s.Name()) }

func (s *PercpuRWSem) detReleased(op string) {
	sched.Released(s)
	sched.At(op, s.Name())
}

// DownReadTrylock takes the lock for reading if no writer holds or waits for
// it. Mirrors percpu_down_read_trylock().
func (s *PercpuRWSem) DownReadTrylock(w Waiter) bool {
	if sched.Active() {
		s.detAt("percpu_down_read_trylock")
	}
	sh := s.shard(w)
	if s.readTrylock(sh) {
		s.acquired(sh, false, true)
		return true
	}
	return false
}

// UpRead releases a read lock. w chooses the counter to decrement; it need
// not be the one DownRead used, since only the sum counts. Mirrors
// percpu_up_read().
func (s *PercpuRWSem) UpRead(w Waiter) {
	s.shard(w).readers.Add(-1)
	if s.block.Load() != 0 {
		// A writer may be waiting for the readers to drain.
		s.wakeWriter()
	}
	if sched.Active() {
		s.detReleased("percpu_up_read")
	}
}

// DownWrite takes the lock for writing: it sets block (or queues behind the
// current writer), then waits for all readers to leave. Both waits are
// uninterruptible. Mirrors percpu_down_write().
func (s *PercpuRWSem) DownWrite(w Waiter) {
	if sched.Active() {
		s.detAt("percpu_down_write")
	}
	var start time.Time
	contended := false
	if s.rss != nil {
		s.rss.enter(w) // Notify readers to take the slow path.
	}
	if !s.writeTrylock() {
		start = sched.Now()
		contended = true
		s.wait(w, false)
	}
	// Wait for all active readers to complete (rcuwait_wait_event).
	if !s.readersDrained() {
		if !contended {
			start = sched.Now()
			contended = true
		}
		ch := make(chan struct{}, 1)
		s.writer.Store(&ch)
		for !s.readersDrained() {
			sleep(w, func() { sched.Wait(s, s.Name()+" readers", ch, nil) })
		}
		s.writer.Store(nil)
	}
	s.acquired(&s.shards[0], true, false)
	if contended {
		s.stats.record(s.Name(), w, sched.Since(start))
	}
}

// DownWriteTrylock takes the lock for writing if no writer holds it and no
// reader is inside; it never sleeps. (The kernel has no such call; this is
// percpu_down_write() that gives up instead of waiting.)
func (s *PercpuRWSem) DownWriteTrylock() bool {
	if sched.Active() {
		s.detAt("percpu_down_write_trylock")
	}
	if s.rss != nil && !s.rss.tryEnter() {
		return false
	}
	if !s.writeTrylock() {
		if s.rss != nil {
			s.rss.exit()
		}
		return false
	}
	if !s.readersDrained() {
		// Readers that saw block in the meantime may have queued.
		if sched.Active() {
			sched.AcquiredClass(s, s.Name(), true, s.class, 0, true) // for UpWrite to release
		}
		s.UpWrite()
		return false
	}
	s.acquired(&s.shards[0], true, true)
	return true
}

// UpWrite releases the write lock: block is cleared, then queued readers are
// woken from the head until one writer has been woken or a trylock on a
// waiter's behalf fails. Mirrors percpu_up_write() and
// percpu_rwsem_wake_function().
func (s *PercpuRWSem) UpWrite() {
	if s.block.Swap(0) == 0 {
		panic("locking: UpWrite of " + s.Name() + " not write-locked")
	}
	s.waitLock.Lock()
	for s.head != nil {
		e := s.head
		// Concurrent against DownWrite: the lock can get stolen.
		if e.reader {
			if !s.readTrylock(s.shard(e.task)) {
				break
			}
		} else if !s.writeTrylock() {
			break
		}
		s.head = e.next
		if s.head == nil {
			s.tail = nil
		}
		e.next = nil
		s.nwait--
		e.granted.Store(true)
		wakeUp(e.wake)
		if !e.reader {
			break // a writer is woken exclusively
		}
	}
	s.waitLock.Unlock()
	if s.rss != nil {
		s.rss.exit() // The fast path again, a grace period hence.
	}
	if sched.Active() {
		s.detReleased("percpu_up_write")
	}
}

// IsWriteLocked reports whether a writer holds the lock or is taking it
// (block is set). Mirrors percpu_is_write_locked().
func (s *PercpuRWSem) IsWriteLocked() bool {
	return s.block.Load() != 0
}

// Readers returns the sum of the reader counters: the readers inside, plus
// for a moment readers on their way in or out.
func (s *PercpuRWSem) Readers() int64 {
	var sum int64
	for i := range s.shards {
		sum += s.shards[i].readers.Load()
	}
	return sum
}

// Waiters returns how many tasks are queued on the lock (not counting a
// writer that holds block and waits for readers to drain).
func (s *PercpuRWSem) Waiters() int {
	s.waitLock.Lock()
	defer s.waitLock.Unlock()
	return s.nwait
}

// WriterWaitingForReaders reports whether a writer has set block and sleeps
// until the readers drain.
func (s *PercpuRWSem) WriterWaitingForReaders() bool {
	return s.writer.Load() != nil
}

// Stats returns the lock's counters.
func (s *PercpuRWSem) Stats() LockStats {
	var st LockStats
	for i := range s.shards {
		st.Acquisitions += s.shards[i].acquisitions.Load()
	}
	s.stats.fill(&st)
	return st
}

// ResetStats zeroes the lock's counters.
func (s *PercpuRWSem) ResetStats() {
	for i := range s.shards {
		s.shards[i].acquisitions.Store(0)
	}
	s.stats.reset()
}

// readTrylock mirrors __percpu_down_read_trylock(): increment, then look at
// block. If a writer set block, it will see the increment; a reader that
// increments after the writer looked sees block and backs out.
func (s *PercpuRWSem) readTrylock(sh *percpuShard) bool {
	sh.readers.Add(1)
	if s.block.Load() == 0 {
		return true
	}
	sh.readers.Add(-1)
	// Prod the writer to re-evaluate readers_active_check().
	s.wakeWriter()
	return false
}

// writeTrylock mirrors __percpu_down_write_trylock(): writer-writer
// exclusion through block.
func (s *PercpuRWSem) writeTrylock() bool {
	if s.block.Load() != 0 {
		return false
	}
	return s.block.Swap(1) == 0
}

// readersDrained mirrors readers_active_check(): once block is set, a zero
// sum is stable.
func (s *PercpuRWSem) readersDrained() bool {
	return s.Readers() == 0
}

// wakeWriter mirrors rcuwait_wake_up().
func (s *PercpuRWSem) wakeWriter() {
	if ch := s.writer.Load(); ch != nil {
		wakeUp(*ch)
	}
}

// wait mirrors percpu_rwsem_wait(): under waitLock, try once more, else
// queue at the tail (exclusive, so FIFO) and sleep until a waker has taken
// the lock for us.
func (s *PercpuRWSem) wait(w Waiter, reader bool) {
	e := &percpuWaiter{reader: reader, task: w, wake: make(chan struct{}, 1)}
	s.waitLock.Lock()
	var ok bool
	if reader {
		ok = s.readTrylock(s.shard(w))
	} else {
		ok = s.writeTrylock()
	}
	if !ok {
		if s.tail != nil {
			s.tail.next = e
		} else {
			s.head = e
		}
		s.tail = e
		s.nwait++
	}
	s.waitLock.Unlock()
	if ok {
		return
	}
	for !e.granted.Load() {
		sleep(w, func() { sched.Wait(s, s.Name(), e.wake, nil) })
	}
}
