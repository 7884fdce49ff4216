package rcu

import (
	"fmt"
	"sync"
	"sync/atomic"

	"mmlab/sched"
)

// TasksTrace is an RCU Tasks Trace domain: the read side touches only the
// calling thread's own state (sched.Thread.Trc), with plain loads and stores.
//
// A grace period learns each thread's nesting with sched.Thread.CallFunc:
// for a running thread, an IPI whose handler runs on that thread; for a
// thread that is not running, a read under its CPU's runqueue lock, which the
// thread needs before it can run again. A thread found inside a read section
// becomes a holdout: the grace period stores a report func in its
// Trc.NeedQS, and the thread's outermost ReadUnlock calls it.
//
// Why the race detector is satisfied by construction (happens-before edges):
//   - Trc.Nesting and Trc.NeedQS are written by the thread itself, by an IPI
//     handler running on the thread (program order), or under the runqueue
//     lock while the thread is not running (ordered with the thread's own
//     accesses by the runqueue lock and its run token hand-off; see package
//     sched).
//   - A reader's critical section happens before the end of the grace period
//     that waits for it: if the reader was a holdout, through its report
//     (trcGP.mu and the done channel); if it had already left when inspected,
//     through the IPI's completion or the runqueue lock.
//   - Stores the updater made before Synchronize happen before every read
//     section that was not inspected as ongoing: the IPI is queued under the
//     runqueue lock the target takes to run it, and a thread not running
//     takes the runqueue lock before it runs again; threads created later are
//     created after the scan's snapshot of the thread list.
//
// The kernel has one Tasks Trace domain; here a System may have several, and
// they share each thread's nesting count, so a grace period of one also
// waits for the readers of another (never too short, possibly longer).
// The kernel scans only running tasks plus tasks that blocked inside a read
// section (rcu_tasks_trace_qs_blkd()); the model scans every thread, which
// is what older kernels did (for_each_process_thread()).
type TasksTrace struct {
	domain
	sys *sched.System

	nHoldouts, nIPIs atomic.Uint64

	lastEnd int64         // jiffy the last timed grace period ended; under gpMu
	nStarts atomic.Uint64 // grace periods started
}

// NewTasksTrace returns a Tasks Trace domain, named "tasks-trace", for the
// threads of sys.
func NewTasksTrace(sys *sched.System) *TasksTrace {
	tt := &TasksTrace{sys: sys}
	tt.init("tasks-trace", "rcu_tasks_trace_gp_mutex", sys, tt.Synchronize)
	return tt
}

// ReadLock enters a read section: one plain increment of t's nesting, t
// being the calling thread. Returns 0. Mirrors
// include/linux/rcupdate_trace.h:rcu_read_lock_trace().
func (tt *TasksTrace) ReadLock(t *sched.Thread) int {
	if t.Deterministic() {
		point(t, "rcu_read_lock_trace")
	}
	t.Trc.Nesting++
	return 0
}

// ReadUnlock leaves a read section. If that ends the outermost section and a
// grace period flagged t, it reports the quiescent state (slow path). No IPI
// can run between the decrement and the check (IPIs run at Points), so the
// kernel's INT_MIN trick is not needed. Mirrors
// include/linux/rcupdate_trace.h:rcu_read_unlock_trace().
func (tt *TasksTrace) ReadUnlock(t *sched.Thread, _ int) {
	n := t.Trc.Nesting - 1
	t.Trc.Nesting = n
	if n == 0 && t.Trc.NeedQS != nil {
		readUnlockTraceSpecial(t)
	} else if n < 0 {
		panic(fmt.Sprintf("rcu: tasks-trace ReadUnlock without ReadLock on thread %d", t.ID()))
	}
	if t.Deterministic() {
		point(t, "rcu_read_unlock_trace")
	}
}

// readUnlockTraceSpecial reports t's quiescent state to the grace periods
// waiting for it. Mirrors kernel/rcu/tasks.h:rcu_read_unlock_trace_special().
func readUnlockTraceSpecial(t *sched.Thread) {
	report := t.Trc.NeedQS
	t.Trc.NeedQS = nil
	report()
}

// trcGP is one grace period's holdout accounting.
type trcGP struct {
	// mu protects holdouts and scanned. Taken by readers' slow path.
	mu       sync.Mutex
	holdouts int           // threads flagged and not yet reported
	scanned  bool          // every thread has been inspected
	done     chan struct{} // closed when scanned and holdouts == 0
}

// Synchronize waits for every read section that began before it. Mirrors
// kernel/rcu/tasks.h:rcu_tasks_wait_gp() with the Tasks Trace steps: inspect
// every thread (rcu_tasks_trace_pregp_step(), trc_wait_for_one_reader()),
// then wait until the holdout list is empty
// (check_all_holdout_tasks_trace()), here by counting reports instead of
// rescanning.
func (tt *TasksTrace) Synchronize() {
	sched.At("synchronize_rcu_tasks_trace", "")
	tt.gpMu.Lock()
	defer tt.gpMu.Unlock()
	if tt.timing.timed() {
		tt.startTimed()
		defer func() { tt.lastEnd = tt.timing.jiffies() }()
	}
	tt.nStarts.Add(1)
	gp := &trcGP{done: make(chan struct{})}
	var running atomic.Bool
	var wg sync.WaitGroup
	for _, t := range tt.sys.Threads() {
		inspect := func() {
			t.CallFunc(func(isRunning bool) {
				if isRunning {
					tt.nIPIs.Add(1)
					running.Store(true)
				}
				gp.inspect(t)
			})
		}
		if tt.sys.Deterministic() {
			inspect() // at once, on the caller (see sched.Thread.CallFunc)
			continue
		}
		// One goroutine per thread: IPIs to running threads proceed in
		// parallel, as the kernel's are asynchronous.
		wg.Go(inspect)
	}
	wg.Wait()
	defer tt.nGPs.Add(1)
	gp.mu.Lock()
	gp.scanned = true
	n := gp.holdouts
	gp.mu.Unlock()
	if n > 0 {
		tt.nHoldouts.Add(uint64(n))
		if tt.waitHook != nil { // every thread scanned, holdouts found
			tt.waitHook()
		}
	}
	if tt.timing.timed() {
		tt.waitTimed(running.Load(), gp.reported)
		return
	}
	if n > 0 {
		sched.Wait(nil, "rcu_tasks_trace grace period", gp.done, nil)
	}
}

// reported reports whether every holdout of gp has reported (gp.scanned).
func (gp *trcGP) reported() bool {
	gp.mu.Lock()
	defer gp.mu.Unlock()
	return gp.holdouts == 0
}

// inspect checks t's nesting and flags t as a holdout if it is inside a read
// section. It runs on t itself (IPI) or while t cannot run (runqueue lock).
// Mirrors kernel/rcu/tasks.h:trc_read_check_handler() and
// trc_inspect_reader().
func (gp *trcGP) inspect(t *sched.Thread) {
	if t.Trc.Nesting == 0 {
		return
	}
	gp.mu.Lock()
	gp.holdouts++
	gp.mu.Unlock()
	if prev := t.Trc.NeedQS; prev != nil { // another domain's grace period
		t.Trc.NeedQS = func() { prev(); gp.report() }
	} else {
		t.Trc.NeedQS = gp.report
	}
}

// report is a holdout's quiescent state.
func (gp *trcGP) report() {
	gp.mu.Lock()
	gp.holdouts--
	if gp.holdouts == 0 && gp.scanned {
		sched.Close(gp.done)
	}
	gp.mu.Unlock()
}

// Stats returns the domain's grace-period counts.
func (tt *TasksTrace) Stats() GPStats {
	return GPStats{GPs: tt.nGPs.Load(), Waits: tt.nHoldouts.Load(), IPIs: tt.nIPIs.Load()}
}

// Call runs fn after a grace period. Mirrors
// kernel/rcu/tasks.h:call_rcu_tasks_trace().
func (tt *TasksTrace) Call(fn func()) { tt.cbs.call(fn) }

// Barrier waits for every callback queued before it. Mirrors
// kernel/rcu/tasks.h:rcu_barrier_tasks_trace().
func (tt *TasksTrace) Barrier() { tt.cbs.barrier() }
