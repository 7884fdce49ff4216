// Package sched models the CPUs of the mmlab kernel, in three modes: real
// time (NewSystem), where model threads run in parallel on OS threads
// (pinned to host CPUs by a Config.Host); deterministic (New with
// Config.Deterministic), where one model thread runs at a time, chosen by a
// seeded scheduler, in virtual time; and sim (New with Config.Sim), where
// one model thread runs at a time on virtual CPUs with clocks of their own,
// scheduled as Linux schedules.
//
// # Real-time mode
//
// A model CPU is a run token plus a small run queue. A model thread (a
// Thread; kernel.Task owns one) is a goroutine locked to its own OS thread,
// which a Config.Host pins to the host core that backs its model CPU. A
// thread executes model code only while it is the CPU's current thread
// (CPU.curr), so at most one thread runs on a model CPU at a time and
// per-CPU data can be indexed by the real model CPU id (Thread.CPU).
//
// Scheduling is cooperative, as inside a non-preemptible kernel: a thread
// gives up its CPU only at a preemption point (Point, Yield), when it blocks
// (Block) or when it exits. At a Point the thread first runs the IPIs queued
// for its CPU (smp_call_function_single), then yields to a runnable thread of
// the same CPU with a strictly better (lower) priority, the model's version of
// TIF_NEED_RESCHED and preempt_schedule(). Priorities are nice-like: lower is
// more important. Scheduling is strict priority, FIFO among equals; unlike
// CFS there is no time slicing, so threads of equal priority share a CPU
// through Yield or Block. A low-priority thread that holds a lock can
// therefore be preempted at its next Point by a normal-priority thread that
// wakes up on the same CPU, which is the priority inversion of seed 003.
//
// Rules for model code: a thread waits only through Block (a thread that waits
// on a Go channel while it holds its CPU stalls its CPU, and IPIs to it, until
// the wait ends), and the wait func given to Block runs no model code. IPIs
// are sent by goroutines that hold no model CPU (IPI, CallFunc) or by a thread
// through IPIFrom, which waits inside Block, as the kernel sends them with
// interrupts enabled.
//
// # Deterministic mode
//
// A System made by New(Config{Deterministic: true, Seed: s}) runs the same
// model code differently: its threads are plain goroutines (no locked OS
// threads), exactly one of which runs at a time, holding a baton that a
// switch hands over with one channel send. Threads start in Run, which
// returns when all have exited. At every preemption point a seeded chooser
// (or a forced Schedule) picks the next runnable thread among all of them,
// whatever their CPU: model CPUs are labels for per-CPU data, IPIs and RCU.
// The preemption points are the ones the model already has: lock
// operations of package locking, RCU read sections and grace periods, VMA
// steps, dup_mmap's per-VMA step and exit_mmap in mm, register_for_each_vma's
// passes and the writes of x86's int3_update in uprobes,
// and every Config.Quantum-th Point (instruction boundaries of the
// interpreter). Model code names them with At ("down_write",
// "mmap_lock"). A thread sleeps only through Wait (a receive from a channel
// that a waker sends to with Notify or closes with Close) or Sleep, so a
// blocked thread becomes runnable only when another thread wakes it. An IPI
// or CallFunc runs at once on the sender: every other thread is at a
// preemption point or asleep (a thread that resumes reloads what it caches:
// Thread.Resumed). Time is virtual: Now, Since and Sleep read one clock per
// run, starting at Epoch, which advances only when every live thread sleeps
// on it, to the earliest deadline. Priorities are ignored.
//
// Locks report what a thread holds (Acquired, Released), so that each
// Decision of the run's Record says which thread reached which point
// holding what, and which thread ran next; Record.String prints it and
// Record.Schedule returns the choices, which Config.Schedule replays exactly
// (under any seed and any GOMAXPROCS). A run fails with a *RunError
// carrying the record: a *DeadlockError when every live thread is blocked
// and none sleeps on the clock (with the wait cycle through the locks held,
// if there is one), a *CheckError when Config.Check, a predicate over model
// state run at every decision, fails, ErrMaxSteps, or ErrSchedule; built
// with -tags invariants, also a *LockOrderError when a lock whose class
// package mmlab/locking/lockrank ranks (AcquiredClass) is taken against
// lockrank.Order and the System does not exempt it (ExemptLockOrder).
//
// An explorer of interleavings uses it like this:
//
//	sys := sched.New(sched.Config{CPUs: 2, Deterministic: true, Seed: seed,
//		Schedule: prefix, Check: invariant})
//	m := kernel.NewMachineOn(sys)       // or any model code on sys
//	m.Start(task, 0, 0, body)           // or sys.SpawnNamed(name, cpu, prio, fn)
//	rec, err := sys.Run()
//	// err: nil, or a *RunError (errors.As to *DeadlockError, *CheckError)
//	// rec.Schedule(): the choices made; extend or flip one and run again.
//
// Config.Choose replaces the seeded chooser with the explorer's own (a
// strategy such as PCT), and System.EachThread lets Check see each
// thread's last point, its wait and its locks (package explore does both).
//
// Deterministic runs of one process are serialised (Run holds a global
// lock), and model code finds the running thread of the active run through
// a global (Current): while a deterministic run is active no goroutine
// outside it may run model code (built with -tags invariants, every
// decision checks that its caller is the running thread's goroutine). Model code must not sleep on anything but
// Wait and Sleep (a sync.Mutex held across a preemption point, or a raw
// channel receive, would hang the run).
//
// # Sim mode
//
// A System made by New(Config{CPUs: n, Seed: s, Sim: &SimConfig{Until: d}})
// runs on the deterministic mode's machinery (one goroutine holds the
// baton; Wait, Notify, Close, Sleep, Acquired, Check and deadlock reports
// work as there), with another scheduler: up to MaxSimCPUs virtual CPUs,
// each with its own clock and a run queue scheduled as Linux v6.19
// schedules: package mmlab/sched/fair's EEVDF, a thread's priority being
// its nice level; SCHED_FIFO and SCHED_RR (Thread.SetPolicy); the tick at
// SimConfig.HZ; the preemption model SimConfig.Preempt; CPU affinity
// (Thread.SetAffinity; a thread starts pinned to its CPU). Time passes only
// as threads charge it: Charge (kernel work), ChargeUser (user mode), Point
// (SimConfig.PointCost), Relax (RelaxCost). Now, Since, Sleep and
// ThreadCPUTime read the running thread's CPU's clock, never the host's.
//
// The thread that runs is the current thread of the busy CPU whose clock
// is earliest (ties broken by the seed), once every timer due by that clock
// has fired (a timer fires before a CPU at the same time runs on). So the
// running CPU's clock never goes back and every access to shared state is
// made in nondecreasing virtual time. The rule that saves host hand-offs (a
// few µs each): the running thread goes on without one while its CPU's
// clock stays below the horizon, the earliest clock of the other busy CPUs
// and the earliest timer as of the last hand-off (lowered when it wakes a
// thread onto an idle CPU). A charge stops at its CPU's ticks and at
// timers, not at other CPUs' clocks: it is atomic with respect to them, so
// a wake-up or reschedule that another CPU sends a CPU in the middle of a
// charge takes effect at the charge's end, where the kernel would take the
// IPI at once (a model choice; a charge's length bounds the error), and a
// CPU that went idle after a long charge starts a thread woken meanwhile at
// its own later clock.
//
// A reschedule (TIF_NEED_RESCHED; TIF_NEED_RESCHED_LAZY for the fair class
// under the lazy model, which the next tick promotes) takes effect: at
// return to user (Point, and every tick or timer inside ChargeUser) in
// every model; at a kernel preemption point (At) under voluntary
// (might_resched()), full and lazy (preempt_enable()); at a tick or timer
// inside a Charge under full and lazy (the interrupt's return to
// preemptible kernel code). A thread that blocks, sleeps, yields or exits
// always schedules.
//
// A run ends when every thread has exited, at a deadlock (*DeadlockError),
// or once every busy CPU's clock and every timer has reached Until
// (Record.TimeLimit; the live threads are then ended as an aborted run's
// are). It keeps no decision record. Model choices besides the charge's
// atomicity: no load balancing (a thread moves only when it wakes, to an
// idle CPU, so runs with one CPU overloaded while another is idle and
// nobody wakes differ from Linux's); wake-up placement simplified
// (selectCPU); no ticks on an idle CPU (NO_HZ idle), every CPU's ticks at
// multiples of TICK_NSEC; a context switch and a wake-up cost what
// SimConfig.Costs says (SimCosts: the switch charged to the incoming
// thread, the wake-up as latency before a wakee on an idle CPU runs;
// after an idle, the CPU's first kernel work pays SimCosts.PostIdle);
// IPIs and CallFunc run at once on the sender, as in deterministic mode,
// which pays what model code charges for them (ChargeCost(CostIPI)).
//
// Model code charges events of fixed cost with ChargeCost (an int3, a
// syscall, a page fault, a populated page, an IPI: SimCosts), and an
// instruction costs SimConfig.InstructionPS (or PointCost) at its Point.
//
// Lock order (each line starts with a lock class of package
// mmlab/locking/lockrank, whose Order its tests check this tree against;
// these two never nest):
//
//	tasklist      System.mu (thread registry; never held while taking a runqueue lock)
//	rq            CPU.rq (one CPU's runqueue lock; no other sched lock nests inside)
//
// A deterministic run's state has no lock: only the thread holding the
// baton, or Run's goroutine while no thread holds it, touches it, and the
// baton's hand-offs order those accesses.
//
// Happens-before edges that other packages rely on (package rcu does):
//   - everything a thread did while it was current on its CPU happens before
//     anything done by a holder of that CPU's rq lock that finds the thread not
//     current (the thread gave up the CPU under rq);
//   - anything done under rq while the thread is not current happens before
//     the thread runs again (it becomes current under rq and is handed the
//     run token through its wake channel);
//   - an IPI handler runs on the target thread's goroutine, between two of its
//     Points, and its completion happens before IPI or CallFunc returns.
package sched

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Bits of CPU.flags.
const (
	flagIPI     = 1 << iota // CPU.ipis is not empty
	flagResched             // a runnable thread may beat the current one
)

// System is a set of model CPUs and the threads that run on them.
type System struct {
	cpus []*CPU

	stopping atomic.Bool
	wg       sync.WaitGroup // one count per thread not yet exited
	helpers  sync.WaitGroup // one count per Go goroutine not yet returned

	// mu protects threads and nextID. Never held while taking a CPU's rq.
	mu      sync.Mutex
	threads map[*Thread]struct{}
	nextID  int

	det *detRun // the deterministic run; nil in real-time mode

	host         Host        // Config.Host; nil: threads are not pinned
	hostPrio     bool        // Config.HostPriority
	hostPrioFail atomic.Bool // a thread could not take its host priority
}

// CPU is one model CPU.
type CPU struct {
	// ID is the model CPU id, 0 <= ID < System.NumCPU().
	ID int
	// Host is the host CPU its threads are pinned to, or -1 if none.
	Host int

	system *System

	// flags holds flagIPI and flagResched. Set and cleared under rq; Point
	// reads it without a lock, so an idle Point costs one atomic load.
	flags atomic.Uint32

	// rq is the runqueue lock. It protects curr, runnable and ipis, and the
	// right to inspect the per-thread state of a thread of this CPU that is
	// not current (see CallFunc). Innermost lock of the package.
	rq       sync.Mutex
	curr     *Thread   // the thread holding the run token; nil when idle
	runnable []*Thread // threads waiting for the token, FIFO within a priority
	ipis     []*ipi    // queued IPIs, run by curr at its next Point
	switches uint      // context switches so far, for handOff's yields

	_ [64]byte // keep CPUs on separate cache lines
}

// ipi is one queued cross-CPU call.
type ipi struct {
	fn   func(running *Thread)
	done chan struct{}
}

// TraceState is the per-thread state of RCU Tasks Trace: it mirrors
// task_struct's trc_reader_nesting and trc_reader_special.b.need_qs. It
// belongs to package rcu. Only the thread itself, an IPI handler running on
// it, or a CallFunc handler while the thread is not running may touch it; so
// its fields are plain, not atomic.
type TraceState struct {
	// Nesting is the read-side nesting depth (trc_reader_nesting).
	Nesting int
	// NeedQS, when not nil, is how the thread reports a quiescent state to a
	// waiting grace period when Nesting drops to 0 (need_qs).
	NeedQS func()
}

// Thread is a schedulable entity bound to one model CPU.
type Thread struct {
	// Trc is RCU Tasks Trace's per-thread state; see TraceState. It is
	// written on every read-side entry, so it has cache lines of its own,
	// as it does inside the kernel's large task_struct.
	_   [64]byte
	Trc TraceState
	_   [64]byte

	id   int
	cpu  *CPU
	det  *detThread // deterministic-mode state; nil in real-time mode
	name string

	// Context switch counts (task_struct's nvcsw and nivcsw): written by
	// the thread itself, read by anyone.
	nvcsw  atomic.Uint64 // voluntary: Block, Yield
	nivcsw atomic.Uint64 // involuntary: preempted at a Point

	prio int           // protected by cpu.rq; written only by the thread itself
	wake chan struct{} // receives the run token; capacity 1
	done chan struct{} // closed when the thread has exited
}

// Host is the host that real-time mode runs model threads on, as
// Config.Host: each method acts on the calling OS thread, to which the
// model thread's goroutine is locked.
type Host interface {
	// CPUs returns the host CPUs the thread may run on, in order.
	CPUs() ([]int, error)
	// Pin binds the thread to the host CPUs cpus.
	Pin(cpus ...int) error
	// SetFIFO makes the thread SCHED_FIFO at real-time priority prio.
	SetFIFO(prio int) error
	// SetNice makes the thread SCHED_NORMAL at nice nice.
	SetNice(nice int) error
	// ThreadCPUTime returns the CPU time of the calling OS thread, and
	// whether the host gives it.
	ThreadCPUTime() (time.Duration, bool)
}

// NewSystem returns a real-time System of ncpu model CPUs whose threads
// are not pinned to host CPUs (New with a Config.Host pins them).
func NewSystem(ncpu int) *System {
	if ncpu < 1 {
		panic(fmt.Sprintf("sched: NewSystem(%d): need at least one CPU", ncpu))
	}
	s := &System{threads: make(map[*Thread]struct{})}
	for i := range ncpu {
		s.cpus = append(s.cpus, &CPU{ID: i, Host: -1, system: s})
	}
	return s
}

// NumCPU returns the number of model CPUs.
func (s *System) NumCPU() int { return len(s.cpus) }

// CPU returns model CPU i.
func (s *System) CPU(i int) *CPU { return s.cpus[i] }

// Spawn creates a thread of priority prio on model CPU cpu and runs fn on it.
// The thread is runnable when Spawn returns: it runs at once if the CPU is
// idle, else when the current thread reaches a Point (if prio is better) or
// gives up the CPU. Mirrors kernel/fork.c:kernel_thread() + wake_up_new_task().
func (s *System) Spawn(cpu, prio int, fn func(t *Thread)) *Thread {
	return s.SpawnNamed("", cpu, prio, fn)
}

// SpawnNamed is Spawn of a thread named name (for records and reports). In
// a deterministic System the thread runs when the chooser picks it, once
// Run has started.
func (s *System) SpawnNamed(name string, cpu, prio int, fn func(t *Thread)) *Thread {
	c := s.cpus[cpu]
	t := &Thread{cpu: c, prio: prio, name: name, wake: make(chan struct{}, 1), done: make(chan struct{})}
	s.mu.Lock()
	s.nextID++
	t.id = s.nextID
	s.threads[t] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	if s.det != nil {
		if name == "" {
			name = fmt.Sprintf("thread%d", t.id)
		}
		s.det.spawn(t, name, fn)
		return t
	}

	c.rq.Lock()
	c.enqueueLocked(t)
	c.rq.Unlock()
	go t.run(fn)
	return t
}

func (t *Thread) run(fn func(*Thread)) {
	// The goroutine keeps its OS thread to the end, so the pinned OS thread
	// is destroyed when it exits instead of going back to the runtime's pool.
	runtime.LockOSThread()
	if t.cpu.Host >= 0 {
		_ = t.sys().host.Pin(t.cpu.Host) // best effort: a cgroup may forbid the core
	}
	t.setHostPriority()
	<-t.wake
	fn(t)
	t.exit()
}

// exit gives up the CPU for good. Mirrors kernel/exit.c:do_task_dead().
func (t *Thread) exit() {
	if t.Trc.Nesting != 0 {
		panic(fmt.Sprintf("sched: thread %d exits inside an RCU Tasks Trace read section (nesting %d)", t.id, t.Trc.Nesting))
	}
	c := t.cpu
	t.drainIPIsLocked()
	next := c.pickLocked(math.MaxInt)
	yield := c.setCurrLocked(next)
	c.rq.Unlock()
	handOff(next, yield)
	t.sys().forget(t)
}

// setHostPriority gives the calling OS thread, t's, the host priority of
// t's priority if the System has Config.HostPriority: SCHED_FIFO at 1-prio
// for prio <= 0, else SCHED_NORMAL at nice prio. On failure the thread is
// left SCHED_NORMAL at nice 0.
func (t *Thread) setHostPriority() {
	s := t.sys()
	if !s.hostPrio {
		return
	}
	var err error
	if t.prio <= 0 {
		err = s.host.SetFIFO(min(1-t.prio, 99))
	} else {
		err = s.host.SetNice(min(t.prio, 19))
	}
	if err != nil {
		s.hostPrioFail.Store(true)
		_ = s.host.SetNice(0)
	}
}

// HostPriority reports whether Config.HostPriority was asked for and every
// thread so far took its host priority.
func (s *System) HostPriority() bool { return s.hostPrio && !s.hostPrioFail.Load() }

// forget removes the exited thread t from the tasklist and says it is done.
func (s *System) forget(t *Thread) {
	s.mu.Lock()
	delete(s.threads, t)
	s.mu.Unlock()
	close(t.done)
	s.wg.Done()
}

func (t *Thread) sys() *System { return t.cpu.system }

// Go runs fn on a helper of the System that holds no model CPU (the
// workqueue or kthread that runs RCU callbacks): in real-time mode a
// goroutine, which Stop waits for; in deterministic mode a model thread
// named name on CPU 0, so that the chooser schedules it too.
func (s *System) Go(name string, fn func()) {
	if s.det != nil {
		s.SpawnNamed(name, 0, 0, func(*Thread) { fn() })
		return
	}
	s.helpers.Add(1)
	go func() {
		defer s.helpers.Done()
		fn()
	}()
}

// Threads returns a snapshot of the live threads, the model's tasklist, in
// the order they were spawned.
func (s *System) Threads() []*Thread {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := make([]*Thread, 0, len(s.threads))
	for t := range s.threads {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b *Thread) int { return a.id - b.id })
	return ts
}

// Stop asks every thread to finish (Thread.Stopping turns true) and waits
// until all have exited. No thread may be spawned once Stop was called.
func (s *System) Stop() {
	s.stopping.Store(true)
	if s.det != nil {
		s.det.stop()
	}
	s.wg.Wait()
	s.helpers.Wait()
}

// ID returns the thread's id, unique within its System.
func (t *Thread) ID() int { return t.id }

// CPU returns the id of the model CPU the thread runs on.
func (t *Thread) CPU() int { return t.cpu.ID }

// Prio returns the thread's priority. Called by the thread itself.
func (t *Thread) Prio() int { return t.prio }

// Stopping reports whether System.Stop was called; long-running thread
// bodies poll it.
func (t *Thread) Stopping() bool { return t.sys().stopping.Load() }

// Switches returns the thread's voluntary (Block, Yield) and involuntary
// (preempted at a Point) context switches so far, as
// /proc/PID/status's voluntary_ctxt_switches and nonvoluntary_ctxt_switches.
func (t *Thread) Switches() (voluntary, involuntary uint64) {
	return t.nvcsw.Load(), t.nivcsw.Load()
}

// Done returns a channel closed when the thread has exited.
func (t *Thread) Done() <-chan struct{} { return t.done }

// Point is a preemption point, the boundary between two instructions of the
// thread. It runs the IPIs pending for the thread's CPU and yields the CPU to
// a runnable thread of strictly better priority. When there is nothing to do
// it costs one atomic load. Called only by the thread itself.
// Mirrors the interrupt-return path: irq handling, then
// kernel/sched/core.c:preempt_schedule() if TIF_NEED_RESCHED is set.
func (t *Thread) Point() {
	if t.cpu.flags.Load() != 0 || t.det != nil {
		t.point()
	}
}

func (t *Thread) point() {
	if t.det != nil {
		t.detPoint()
		return
	}
	c := t.cpu
	t.drainIPIsLocked()
	if c.flags.Load()&flagResched != 0 {
		c.flags.And(^uint32(flagResched))
		if next := c.pickLocked(t.prio - 1); next != nil {
			t.nivcsw.Add(1)
			t.switchAwayLocked(next)
			return
		}
	}
	c.rq.Unlock()
}

// Yield runs the IPIs pending for the thread's CPU and yields the CPU to the
// best runnable thread of the same or better priority, if any; the thread
// then queues behind the threads of its own priority. Called only by the
// thread itself. Mirrors kernel/sched/core.c:do_sched_yield().
func (t *Thread) Yield() {
	if t.det != nil {
		t.nvcsw.Add(1)
		t.sys().det.decide(t, "yield", "")
		return
	}
	c := t.cpu
	t.drainIPIsLocked()
	if next := c.pickLocked(t.prio); next != nil {
		t.nvcsw.Add(1)
		t.switchAwayLocked(next)
		return
	}
	c.rq.Unlock()
}

// switchAwayLocked puts t back on the run queue, hands the CPU to next,
// unlocks rq and waits for the run token. t is current; rq is held.
func (t *Thread) switchAwayLocked(next *Thread) {
	c := t.cpu
	c.runnable = append(c.runnable, t)
	yield := c.setCurrLocked(next)
	c.rq.Unlock()
	handOff(next, yield)
	<-t.wake
}

// Block gives up the CPU while wait runs, and takes it back afterwards: locks
// call it around their sleeps. wait runs on the thread's goroutine but not as
// model code (the thread is not current). On return the thread is current
// again, possibly after threads of better priority ran. Called only by the
// thread itself. Mirrors a sleep: set_current_state(), schedule(), and the
// try_to_wake_up() that ends it.
//
// In deterministic mode wait runs on the thread as kernel code: it must
// sleep only through Wait or Sleep (every model wait does).
func (t *Thread) Block(wait func()) {
	if t.det != nil {
		wait()
		return
	}
	c := t.cpu
	t.drainIPIsLocked()
	next := c.pickLocked(math.MaxInt)
	c.setCurrLocked(next)
	c.rq.Unlock()
	t.nvcsw.Add(1)
	// handOff's send readies next onto this goroutine's P. If wait keeps
	// the OS thread in a host syscall (a nanosleep), the P stays with it,
	// and next would run only once the runtime's sysmon takes the P away,
	// which can be milliseconds: so Block yields the P after every
	// hand-off, not only every yieldEvery-th before it.
	handOff(next, false)
	if next != nil {
		runtime.Gosched()
	}

	wait()

	c.rq.Lock()
	c.enqueueLocked(t)
	c.rq.Unlock()
	<-t.wake
}

// SetPrio changes the thread's priority (set_user_nice). If a runnable
// thread now beats it, it yields at its next Point. Called only by the
// thread itself.
func (t *Thread) SetPrio(prio int) {
	if t.det != nil {
		t.prio = prio // the chooser ignores priorities
		if t.det.sim != nil {
			t.sys().det.sim.reweight(t)
		}
		return
	}
	c := t.cpu
	c.rq.Lock()
	t.prio = prio
	for _, r := range c.runnable {
		if r.prio < prio {
			c.flags.Or(flagResched)
			break
		}
	}
	c.rq.Unlock()
	t.setHostPriority()
}

// drainIPIsLocked runs every IPI queued for t's CPU on t, the current
// thread, and returns with rq held and no IPI queued. Because a thread drains
// before it gives up its CPU, an IPI always runs on the thread that was
// current when it was queued.
func (t *Thread) drainIPIsLocked() {
	c := t.cpu
	for {
		c.rq.Lock()
		if len(c.ipis) == 0 {
			return
		}
		batch := c.ipis
		c.ipis = nil
		c.flags.And(^uint32(flagIPI))
		c.rq.Unlock()
		for _, r := range batch {
			r.fn(t)
			close(r.done)
		}
		// The IPI's sender now waits in this P's runnext slot; yield so it
		// need not wait for sysmon to preempt a thread that spins.
		runtime.Gosched()
	}
}

// pickLocked removes and returns the runnable thread with the best priority
// not worse than maxPrio, first queued first, or nil.
func (c *CPU) pickLocked(maxPrio int) *Thread {
	best := -1
	for i, r := range c.runnable {
		if r.prio <= maxPrio && (best < 0 || r.prio < c.runnable[best].prio) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	t := c.runnable[best]
	c.runnable = append(c.runnable[:best], c.runnable[best+1:]...)
	return t
}

// yieldEvery is how often (in context switches of one CPU) handOff yields
// the Go scheduler's P first.
const yieldEvery = 8

// setCurrLocked makes next (nil: nobody) the current thread of c and says
// whether the hand-off should yield the P first.
func (c *CPU) setCurrLocked(next *Thread) (yield bool) {
	c.curr = next
	c.switches++
	return c.switches%yieldEvery == 0
}

// handOff hands the run token to next, which the caller has made current
// (nil: the CPU went idle). Mirrors kernel/sched/core.c:context_switch().
//
// Every yieldEvery switches it first yields the Go scheduler's P. A
// goroutine woken by a channel send goes to the sender's runnext slot and,
// being locked to its own OS thread, starts a fresh time slice there; two
// model threads that hand the token back and forth would thus keep the P
// forever, and goroutines queued on it (a grace period, the caller of an IPI)
// would starve: a test hung for 600 s on two cores before this yield.
// Yielding at every switch would fix it too, at about twice the cost of a
// switch.
func handOff(next *Thread, yield bool) {
	if next == nil {
		return
	}
	if yield {
		runtime.Gosched()
	}
	next.wake <- struct{}{}
}

// enqueueLocked makes t runnable: current at once on an idle CPU, else
// queued, asking the current thread to reschedule if t beats it. Mirrors
// kernel/sched/core.c:ttwu_do_activate() + wakeup_preempt().
func (c *CPU) enqueueLocked(t *Thread) {
	if c.curr == nil {
		c.curr = t
		t.wake <- struct{}{} // capacity 1: never blocks
		return
	}
	c.runnable = append(c.runnable, t)
	if t.prio < c.curr.prio {
		c.flags.Or(flagResched)
	}
}

// IPI runs fn on CPU c and returns after it ran. If a thread is current on c,
// fn runs on that thread at its next Point (or before it gives up the CPU)
// with running set to it; if c is idle, fn runs at once on the caller, with
// running nil, under c's runqueue lock so no thread can start meanwhile (fn
// must not call into sched for c). Mirrors
// kernel/smp.c:smp_call_function_single(cpu, fn, info, wait=1).
//
// In deterministic mode fn runs at once, on the caller: every other thread
// is at a preemption point or asleep. running is the caller if it runs on
// c, else nil (a thread that is not running reloads what it caches when it
// resumes: Resumed).
func (c *CPU) IPI(fn func(running *Thread)) {
	if c.system.det != nil {
		var r *Thread
		if t := running(); t != nil && t.cpu == c {
			r = t
		}
		fn(r)
		return
	}
	c.rq.Lock()
	if c.curr == nil {
		fn(nil)
		c.rq.Unlock()
		return
	}
	c.queueIPILocked(fn)
}

// IPIFrom is IPI sent by model thread t (nil: by a goroutine outside the
// model, as IPI). To t's own CPU, fn runs at once on t, as
// smp_call_function_single() runs func directly on the calling CPU. To
// another CPU, t waits inside Block, so its own CPU keeps running other
// threads and answering IPIs: two threads that IPI each other's CPU do not
// deadlock.
func (c *CPU) IPIFrom(t *Thread, fn func(running *Thread)) {
	switch {
	case t == nil || c.system.det != nil:
		c.IPI(fn)
	case t.cpu == c:
		fn(t)
	default:
		t.Block(func() { c.IPI(fn) })
	}
}

// queueIPILocked queues fn for the current thread, unlocks rq and waits for
// fn to have run.
func (c *CPU) queueIPILocked(fn func(running *Thread)) {
	r := &ipi{fn: fn, done: make(chan struct{})}
	c.ipis = append(c.ipis, r)
	c.flags.Or(flagIPI)
	c.rq.Unlock()
	<-r.done
}

// CallFunc runs fn with t locked down and returns after it ran. If t is not
// current on its CPU, fn(false) runs on the caller under the CPU's runqueue
// lock: t cannot run until fn returns, so fn may read and write t's
// per-thread state (t.Trc) with plain accesses. If t is current, fn(true) runs
// on t itself, as an IPI, at its next Point. Either way fn must not call into
// sched for t's CPU. Mirrors kernel/sched/core.c:task_call_func() falling back
// to smp_call_function_single() for a running task, as
// kernel/rcu/tasks.h:trc_wait_for_one_reader() does.
//
// In deterministic mode fn runs at once on the caller, with running true if
// t is the caller.
func (t *Thread) CallFunc(fn func(running bool)) {
	if t.det != nil {
		fn(t == running())
		return
	}
	c := t.cpu
	c.rq.Lock()
	if c.curr != t {
		fn(false)
		c.rq.Unlock()
		return
	}
	c.queueIPILocked(func(*Thread) { fn(true) })
}
