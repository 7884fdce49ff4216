package rcu

import (
	"fmt"
	"sync"
	"sync/atomic"

	"mmlab/sched"
)

// Classic is classic (tree) RCU for a non-preemptible kernel
// (CONFIG_PREEMPT_NONE, as on the live kernel here): the protection of the
// lock-free VMA lookups of package mm (lock_vma_under_rcu, lock_next_vma).
//
// A read section cannot be preempted and must not sleep, so the read side
// does nothing at all (rcu_read_lock() is preempt_disable(), a no-op without
// CONFIG_PREEMPT_COUNT), and a CPU that passes a scheduling point is outside
// every read section. In the model that means: no Thread.Point, Yield or
// Block (no lock that may sleep) between ReadLock and ReadUnlock. A grace
// period therefore needs no reader state: it sends every model CPU an IPI,
// which runs at that CPU's next Point (or at once if the CPU is idle), and
// each IPI that ran proves that its CPU has left the read sections it was in.
// This is the expedited grace period of kernel/rcu/tree_exp.h (an IPI per
// CPU, rcu_exp_handler() reporting a quiescent state); the normal one waits
// for each CPU's next context switch, noted by the scheduler tick, which the
// model's cooperative CPUs do not have.
//
// The read side's debug check: ReadLock returns the thread's context-switch
// count and ReadUnlock panics if it changed, i.e. if the thread blocked,
// yielded or was preempted inside the section (the kernel's lockdep splat
// "Illegal context switch in RCU read-side critical section"). A Point that
// only ran IPIs, without a switch, is not caught: sched has no hook for it;
// it is a bug all the same, as cond_resched() inside rcu_read_lock() is.
// Nesting needs no counter: each level has its own token, and the outermost
// ReadUnlock ends nothing by itself; the CPU's next Point does.
//
// Because the read side keeps no state, a grace period of any Classic of a
// System waits for the classic readers of every Classic of it, as the kernel
// has one RCU. Code with no model thread (goroutines outside the model)
// takes no read section: ReadLock(nil) does nothing, and such a reader is
// not waited for.
//
// Deferred freeing: Go's garbage collector stands in for call_rcu() of VMAs
// and maple-tree nodes, so mm never waits for a grace period to free memory;
// an object a reader can still reach is never freed. Synchronize is for code
// that must know the readers have finished (a test that a detached VMA is
// no longer being read, an object poisoned after it was unpublished).
//
// Why the race detector is satisfied (happens-before edges, see package
// sched): a reader's section precedes, in program order, the IPI handler
// that runs at its CPU's next Point, whose completion Synchronize waits for;
// a thread not current when the IPI came gave up its CPU under the runqueue
// lock, which the IPI takes. Stores made before Synchronize precede the IPI
// queued under the runqueue lock, which the CPU's current thread takes to run
// it, and every thread takes before it runs again.
//
// Lock order: Classic.gpMu (serialises grace periods, outermost), then
// sched's CPU.rq (taken by the IPIs), then callbacks.mu (leaf).
type Classic struct {
	domain
	sys   *sched.System
	nIPIs atomic.Uint64
}

// NewClassic returns a classic RCU domain, named "rcu", for the CPUs of sys.
func NewClassic(sys *sched.System) *Classic {
	c := &Classic{sys: sys}
	c.init("rcu", "rcu_gp_mutex", sys, c.Synchronize)
	return c
}

// ReadLock enters a classic read section on t, the calling thread; see
// ReadLock.
func (c *Classic) ReadLock(t *sched.Thread) int { return ReadLock(t) }

// ReadUnlock leaves a classic read section; see ReadUnlock.
func (c *Classic) ReadUnlock(t *sched.Thread, idx int) { ReadUnlock(t, idx) }

// ReadLock enters a classic RCU read section on t, the calling model thread,
// and returns the token to give to ReadUnlock: t's context-switch count, for
// the debug check. It does nothing else, and nothing for a nil t (a caller
// outside the model). Mirrors include/linux/rcupdate.h:rcu_read_lock() on a
// non-preemptible kernel.
func ReadLock(t *sched.Thread) int {
	if t == nil {
		return 0
	}
	v, iv := t.Switches()
	return int(v + iv)
}

// ReadUnlock leaves the read section ReadLock(t) entered. It panics if t
// switched out inside it (blocked, yielded or was preempted). Mirrors
// include/linux/rcupdate.h:rcu_read_unlock() with lockdep's context-switch
// check.
func ReadUnlock(t *sched.Thread, idx int) {
	if t == nil {
		return
	}
	if v, iv := t.Switches(); int(v+iv) != idx {
		panic(fmt.Sprintf("rcu: thread %d switched out inside a classic RCU read section (%d context switches)", t.ID(), int(v+iv)-idx))
	}
}

// Synchronize waits until every classic read section that began before it
// has ended: until every model CPU has run an IPI (at its next Point) or was
// found idle. A model thread calls it inside Thread.Block, since its own
// CPU must answer too. Mirrors kernel/rcu/tree.c:synchronize_rcu() by way of
// synchronize_rcu_expedited() (kernel/rcu/tree_exp.h).
func (c *Classic) Synchronize() {
	sched.At("synchronize_rcu", "")
	c.gpMu.Lock()
	defer c.gpMu.Unlock()
	var wg sync.WaitGroup
	var running atomic.Bool
	for i := range c.sys.NumCPU() {
		cpu := c.sys.CPU(i)
		ipi := func() {
			cpu.IPI(func(cur *sched.Thread) { // rcu_exp_handler()
				if cur != nil {
					c.nIPIs.Add(1)
					running.Store(true)
				}
			})
		}
		if c.sys.Deterministic() {
			ipi() // at once, on the caller (see sched.CPU.IPI)
			continue
		}
		// One goroutine per CPU: the IPIs run in parallel, as
		// sync_rcu_exp_select_cpus() sends them all before it waits.
		wg.Go(ipi)
	}
	if c.waitHook != nil { // the IPIs are sent (sched cannot tell when one is queued)
		c.waitHook()
	}
	wg.Wait()
	c.timing.normalGP(running.Load())
	c.nGPs.Add(1)
}

// Call runs fn after a grace period, on a goroutine of the domain. Mirrors
// kernel/rcu/tree.c:call_rcu().
func (c *Classic) Call(fn func()) { c.cbs.call(fn) }

// Barrier waits for every callback queued before it. Mirrors
// kernel/rcu/tree.c:rcu_barrier().
func (c *Classic) Barrier() { c.cbs.barrier() }

// Stats returns the domain's grace-period counts. Waits and IPIs both count
// the CPUs that were running a thread, which the grace period had to wait
// for until its next Point; idle CPUs answer at once.
func (c *Classic) Stats() GPStats {
	n := c.nIPIs.Load()
	return GPStats{GPs: c.nGPs.Load(), Waits: n, IPIs: n}
}

// OnThread is implemented by a task that runs on a model thread and names it
// (kernel.Runner does): the lock-free VMA lookups of package mm run in
// classic read sections on that thread.
type OnThread interface {
	Thread() *sched.Thread
}

// ThreadOf returns the model thread w names through OnThread, or nil.
func ThreadOf(w any) *sched.Thread {
	if o, ok := w.(OnThread); ok {
		return o.Thread()
	}
	return nil
}

var _ Flavor = (*Classic)(nil)
