// Package rcu models the kernel's read-copy-update: classic RCU for the
// lock-free VMA lookups (classic.go: a non-preemptible kernel's read side,
// grace periods by IPI to every model CPU), and two sleepable flavours, the
// protections of the uprobe hit path before and after seed 004:
//
//   - SRCU (kernel/rcu/srcutree.c, reduced to the classic two-index scheme):
//     per-CPU lock and unlock counters in two slots; a grace period flips the
//     slot that new readers use and waits until the old slot's counters match.
//     The read side pays two atomic read-modify-writes (each a full barrier on
//     x86, the kernel's smp_mb() B and C).
//   - Tasks Trace (kernel/rcu/tasks.h rcu_tasks_trace,
//     include/linux/rcupdate_trace.h): a plain per-thread nesting count, no
//     atomic read-modify-write and no atomic store on the read side. A grace
//     period asks every thread whether it is inside a read section, through
//     an IPI to a running thread or under the runqueue lock of a thread that
//     is not running, and waits for those that are to report on their way out.
//
// All three implement Flavor. Constructed with a Timing (gptime.go:
// NewClassicAt, NewTasksTraceAt, NewSRCUAt), their grace periods also take
// the kernel's delays at that setting (jiffy-aligned timeouts, the Tasks
// Trace holdout loop, SRCU's polling), on a Clock that defaults to the real
// one.
//
// The sleepable flavours' readers are model threads (sched.Thread) and may
// block (sched.Thread.Block) inside their read sections. A model thread that
// calls Synchronize or Barrier does so inside Thread.Block, as a kernel caller
// sleeps: Tasks Trace IPIs running threads, and a thread that waits while it
// holds its CPU never answers.
//
// In sched's deterministic mode the read sides and grace periods are
// preemption points, a grace period inspects threads and sends its IPIs at
// once on the caller (no goroutine per thread or CPU), SRCU's polling
// sleeps on the virtual clock, and the callback worker is a model thread.
//
// Lock order (outermost first; each line starts with a lock class of
// package mmlab/locking/lockrank, whose Order its tests check this tree
// against):
//
//	rcu_gp_mutex              SRCU.gpMu / TasksTrace.gpMu: serialise grace periods (srcu_gp_mutex; a locking.Mutex)
//	  rq                      sched's CPU.rq (taken by a Tasks Trace scan)
//	    trc_gp                trcGP.mu (holdout count of one Tasks Trace grace period)
//	      rcu_callbacks       callbacks.mu (leaf)
//
// Deferred freeing is the callback's business: Go's garbage collector frees
// memory, so Call is used to mark objects dead or to unlink them.
package rcu

import (
	"sync"
	"sync/atomic"

	"mmlab/locking"
	"mmlab/locking/lockrank"
	"mmlab/sched"
)

// Flavor is the API both flavours share.
type Flavor interface {
	// ReadLock enters a read section on t, the calling thread, and returns
	// the index to give to ReadUnlock (SRCU's slot; always 0 for Tasks Trace,
	// as rcu_read_lock_trace() returns nothing). Never blocks.
	ReadLock(t *sched.Thread) int
	// ReadUnlock leaves the read section ReadLock(t) entered. Never blocks
	// (Tasks Trace's slow path takes a short mutex).
	ReadUnlock(t *sched.Thread, idx int)
	// Synchronize waits until every read section that began before it has
	// ended.
	Synchronize()
	// Call runs fn after a grace period, on a goroutine of the flavour.
	Call(fn func())
	// Barrier waits until every fn passed to Call before it has run.
	Barrier()
	// Name is "rcu", "srcu" or "tasks-trace".
	Name() string
	// Stats returns counts of the grace-period work done so far.
	Stats() GPStats
}

// GPStats counts a domain's grace-period work, the writer-side price.
type GPStats struct {
	GPs uint64 // grace periods completed
	// Waits counts readers waited for: SRCU, counter scans that found the
	// slot busy; Tasks Trace, holdout threads.
	Waits uint64
	IPIs  uint64 // Tasks Trace: IPIs to running threads (rcu_tasks_trace.n_ipis)
}

// domain is the state every flavour's domain has besides its read side.
type domain struct {
	name string // Flavor.Name

	// gpMu serialises grace periods; outermost rcu lock. A sleeping lock
	// of package locking, so that a deterministic run schedules its
	// waiters.
	gpMu locking.Mutex

	cbs callbacks

	nGPs atomic.Uint64 // grace periods completed

	timing Timing // the flavour's NewXAt constructor; zero: untimed

	// waitHook, set by tests before any grace period, is called when a
	// grace period is about to wait for readers it found (each flavour's
	// Synchronize says when).
	waitHook func()
}

// init names d and its grace-period mutex, and has its callbacks wait for
// sync, the flavour's Synchronize, on a helper of sys.
func (d *domain) init(name, gpMutex string, sys *sched.System, sync func()) {
	d.name = name
	d.gpMu.SetName(gpMutex)
	d.gpMu.SetClass(lockrank.RCUGPMutex)
	d.cbs.sync, d.cbs.sys = sync, sys
}

// Name returns the flavour's name: "rcu", "srcu" or "tasks-trace".
func (d *domain) Name() string { return d.name }

// callbacks runs queued functions after grace periods, in order, on one
// helper of the System (sched.System.Go) that exists only while the queue is
// not empty. Mirrors the
// callback lists of kernel/rcu/srcutree.c:call_srcu() and
// kernel/rcu/tasks.h:call_rcu_tasks_generic(), with a goroutine for the
// workqueue or kthread that invokes them.
type callbacks struct {
	sync func()        // the flavour's Synchronize
	sys  *sched.System // where a deterministic run's worker is spawned

	// mu protects list and running. Leaf lock.
	mu      sync.Mutex
	list    []func()
	running bool // a worker goroutine is draining list
}

func (q *callbacks) call(fn func()) {
	q.mu.Lock()
	q.list = append(q.list, fn)
	if !q.running {
		q.running = true
		q.sys.Go("rcu_callbacks", q.work)
	}
	q.mu.Unlock()
}

// work waits for a grace period that starts after every queued callback was
// queued, then runs them; callbacks queued meanwhile wait for the next one.
func (q *callbacks) work() {
	for {
		q.mu.Lock()
		batch := q.list
		q.list = nil
		if len(batch) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		q.sync()
		for _, fn := range batch {
			fn()
		}
	}
}

// barrier waits for every callback queued before it. Mirrors
// srcu_barrier() / rcu_barrier_tasks_trace(): the callbacks run in order,
// so queueing one more and waiting for it is enough.
func (q *callbacks) barrier() {
	done := make(chan struct{})
	q.call(func() { sched.Close(done) })
	sched.Wait(nil, "rcu_barrier", done, nil)
}

// point is a preemption point of a read side in a deterministic run, out of
// line so that the read sides stay small enough to inline.
func point(t *sched.Thread, op string) { t.At(op, "") }
