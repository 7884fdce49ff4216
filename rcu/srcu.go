package rcu

import (
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"mmlab/sched"
	"mmlab/smp"
)

// srcuData is one CPU's counters (struct srcu_data's srcu_ctrs[2]): one
// shared line (package smp) per CPU, and in memory on lines of their own
// (a multiple of 128 bytes: x86 prefetches line pairs). The reader's
// this_cpu_inc() and smp_mb() are one locked RMW on the CPU's line; the
// grace period READ_ONCEs every CPU's.
type srcuData struct {
	line    smp.Line
	locks   [2]smp.Uint64
	unlocks [2]smp.Uint64
	_       [256 - unsafe.Sizeof(smp.Line{}) - 4*unsafe.Sizeof(smp.Uint64{})]byte
}

// SRCU is a sleepable-RCU domain (struct srcu_struct), in the classic
// two-index design srcutree.c still follows once the funnel and the
// callback bookkeeping are stripped away.
//
// Memory ordering. Go's atomic operations are sequentially consistent, which
// is what the kernel's full barriers buy: the Add of a reader's lock counter
// is smp_mb() B, the Add of its unlock counter is smp_mb() C, and the loads
// of the grace period are ordered as with smp_mb() A, D and E. The argument
// of srcu_readers_active_idx_check() then carries over unchanged: unlock
// counters are summed before lock counters, so a reader whose unlock is
// counted has its lock counted too; equal sums mean the slot had no reader at
// some instant of the scan; a reader that fetched the slot index before the
// flip but counts itself after the scan can do so at most a bounded number of
// times, and began after the grace period did. For the race detector the
// happens-before edge from a reader's critical section to the end of the
// grace period is the reader's Add to its unlock counter, observed by the
// grace period's load of that counter.
type SRCU struct {
	// ctrIdx selects the slot of new readers: its low bit is the kernel's
	// srcu_ctrp (a pointer to srcu_ctrs[0] or srcu_ctrs[1]).
	ctrIdx smp.Uint32
	sda    []srcuData // indexed by model CPU id

	domain // gpMu is srcu_gp_mutex

	nWaits  atomic.Uint64
	lastEnd time.Time // when the last timed grace period ended; under gpMu
}

// NewSRCU returns an SRCU domain, named "srcu", for the CPUs of sys. Mirrors
// kernel/rcu/srcutree.c:init_srcu_struct().
func NewSRCU(sys *sched.System) *SRCU {
	s := &SRCU{sda: make([]srcuData, sys.NumCPU())}
	s.ctrIdx.Init("srcu.srcu_ctrp")
	for i := range s.sda {
		d := &s.sda[i]
		d.line.SetName("srcu.srcu_data[" + strconv.Itoa(i) + "]")
		d.locks[0].InitOn(&d.line, "srcu_ctrs[0].srcu_locks")
		d.locks[1].InitOn(&d.line, "srcu_ctrs[1].srcu_locks")
		d.unlocks[0].InitOn(&d.line, "srcu_ctrs[0].srcu_unlocks")
		d.unlocks[1].InitOn(&d.line, "srcu_ctrs[1].srcu_unlocks")
	}
	s.init("srcu", "srcu_gp_mutex", sys, s.Synchronize)
	return s
}

// ReadLock counts a reader in the current slot of t's CPU and returns the
// slot. Mirrors kernel/rcu/srcutree.c:__srcu_read_lock().
func (s *SRCU) ReadLock(t *sched.Thread) int {
	if t.Deterministic() {
		point(t, "srcu_read_lock")
	}
	idx := s.ctrIdx.Load() & 1
	s.sda[t.CPU()].locks[idx].Add(1) // this_cpu_inc() + smp_mb() B
	return int(idx)
}

// ReadUnlock counts the reader out of slot idx, on the CPU it runs on now
// (not necessarily the one it entered on). Mirrors
// kernel/rcu/srcutree.c:__srcu_read_unlock().
func (s *SRCU) ReadUnlock(t *sched.Thread, idx int) {
	s.sda[t.CPU()].unlocks[idx].Add(1) // smp_mb() C + this_cpu_inc()
	if t.Deterministic() {
		point(t, "srcu_read_unlock")
	}
}

// Synchronize waits for every reader that began before it. Mirrors
// kernel/rcu/srcutree.c:synchronize_srcu() as driven by
// srcu_advance_state(): wait for stragglers in the inactive slot
// (SRCU_STATE_SCAN1), flip (srcu_flip()), wait for the slot readers used
// until now to drain (SRCU_STATE_SCAN2). Waiting polls with a backoff, as
// the kernel's srcu_get_delay() does.
func (s *SRCU) Synchronize() {
	sched.At("synchronize_srcu", "")
	busy := !s.gpMu.TryLock()
	if busy {
		s.gpMu.Lock()
	}
	defer s.gpMu.Unlock()
	hooked := false // waitHook runs at most once per grace period, when readers first hold it up
	idx := s.ctrIdx.Load()&1 ^ 1
	if s.timing.timed() {
		g := s.startTimed(busy)
		s.waitDrainedTimed(g, idx, 1, &hooked)
		s.ctrIdx.Add(1)
		s.waitDrainedTimed(g, idx^1, 2, &hooked)
		s.lastEnd = s.timing.clock().Now()
	} else {
		s.waitDrained(idx, &hooked)
		s.ctrIdx.Add(1)
		s.waitDrained(idx^1, &hooked)
	}
	s.nGPs.Add(1)
}

// waitDrained polls until slot idx has no readers. Mirrors
// kernel/rcu/srcutree.c:try_check_zero(): two quick checks (readers are
// usually short), then sleeps from SRCU_DEFAULT_RETRY_CHECK_DELAY (5 µs)
// doubling to 1 ms, on the model's clock (sched.Sleep).
func (s *SRCU) waitDrained(idx uint32, hooked *bool) {
	delay := 5 * time.Microsecond
	for try := 0; !s.readersActiveIdxCheck(idx); try++ {
		s.nWaits.Add(1)
		if try < 2 {
			continue
		}
		if !*hooked && s.waitHook != nil {
			*hooked = true
			s.waitHook()
		}
		sched.Sleep(delay)
		delay = min(2*delay, time.Millisecond)
	}
}

// readersActiveIdxCheck reports whether slot idx had no readers at some
// point during the call. Mirrors
// kernel/rcu/srcutree.c:srcu_readers_active_idx_check(): unlocks first, then
// (after the barrier the atomics imply) locks.
func (s *SRCU) readersActiveIdxCheck(idx uint32) bool {
	var unlocks, locks uint64
	for i := range s.sda {
		unlocks += s.sda[i].unlocks[idx].Load()
	}
	for i := range s.sda {
		locks += s.sda[i].locks[idx].Load()
	}
	return locks == unlocks
}

// Stats returns the domain's grace-period counts.
func (s *SRCU) Stats() GPStats {
	return GPStats{GPs: s.nGPs.Load(), Waits: s.nWaits.Load()}
}

// Call runs fn after a grace period. Mirrors
// kernel/rcu/srcutree.c:call_srcu().
func (s *SRCU) Call(fn func()) { s.cbs.call(fn) }

// Barrier waits for every callback queued before it. Mirrors
// kernel/rcu/srcutree.c:srcu_barrier().
func (s *SRCU) Barrier() { s.cbs.barrier() }
