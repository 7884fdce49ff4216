package sched

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"

	"mmlab/machine"
	"mmlab/sched/fair"
)

// MaxSimCPUs is the most virtual CPUs a sim System has.
const MaxSimCPUs = 128

// Preempt is a kernel preemption model (CONFIG_PREEMPT_NONE, _VOLUNTARY,
// _PREEMPT, _LAZY; preempt= at boot).
type Preempt int

const (
	PreemptNone Preempt = iota
	PreemptVoluntary
	PreemptFull
	PreemptLazy
)

func (p Preempt) String() string {
	return [...]string{"none", "voluntary", "full", "lazy"}[p]
}

// Policy is a thread's scheduling policy in sim mode.
type Policy int

const (
	PolicyNormal Policy = iota // SCHED_NORMAL: the fair class
	PolicyFIFO                 // SCHED_FIFO
	PolicyRR                   // SCHED_RR
)

// SimConfig, as Config.Sim, selects sim mode (see the package doc).
type SimConfig struct {
	// Until bounds the run in virtual time: it ends once every busy CPU's
	// clock and every timer has reached Until (required).
	Until time.Duration
	// HZ is the tick rate (0: 250).
	HZ int
	// Preempt is the preemption model (the zero value: none).
	Preempt Preempt
	// Features is the fair class's SCHED_FEAT set (nil: fair.V6_19()).
	Features *fair.Features
	// NormalizedSlice is normalized_sysctl_sched_base_slice in ns (0:
	// fair.NormalizedBaseSlice, v6.19's 0.70 ms); the base slice scales it
	// by the CPU count as the kernel does.
	NormalizedSlice int64
	// PointCost is the time a Point (an interpreted instruction) takes
	// (0: 1 ns, one cycle at 1 GHz), and RelaxCost a Relax (0: 140 ns, a
	// PAUSE's 140 cycles at 1 GHz): model choices until machine
	// descriptions give these costs.
	PointCost, RelaxCost time.Duration
	// InstructionPS, if positive, replaces PointCost: a Point's cost in
	// picoseconds, summed per thread so that an instruction shorter than
	// a nanosecond (one cycle at 2 GHz) adds up to whole nanoseconds.
	InstructionPS int64
	// Costs are the fixed costs of the events model code charges
	// (ChargeCost) and of the scheduler's own work; zero: free.
	Costs SimCosts
	// Lookahead is how far in virtual time a thread at its Points (user
	// mode) may run ahead of the other busy CPUs' clocks without a
	// hand-off (0: not at all); timers, ticks and kernel code keep the
	// strict rule. A model choice that trades causal order for speed:
	// with two CPUs busy in user mode the strict rule hands off at every
	// instruction; user memory that threads share may be read up to
	// Lookahead out of order.
	Lookahead time.Duration
	// Noise interrupts a busy CPU's thread (machine.Noise; the zero
	// SimNoise: none).
	Noise SimNoise
	// Machine, if set, is the machine whose topology and cache-line
	// costs package mmlab/smp charges for the run's shared words (nil:
	// they cost nothing). Its Topology should have at least CPUs CPUs
	// (package smp wraps the CPUs beyond).
	Machine *machine.Description
}

// SimCosts are the fixed costs of a sim run's events, as a machine
// description gives them.
type SimCosts struct {
	// Int3, Syscall, PageFault, PopulatePage, IPI, Fork, ForkPage and
	// ZapPage are ChargeCost's events: CostInt3 and the others.
	Int3, Syscall, PageFault, PopulatePage, IPI, Fork, ForkPage, ZapPage time.Duration
	// ForkSamples, where set, replace Fork: each fork's fixed cost is one
	// of them, drawn uniformly by the run's seeded generator
	// (machine.Cost.Samples).
	ForkSamples []time.Duration
	// ContextSwitch is charged to the incoming thread of every switch
	// from one thread to another on a CPU (context_switch(): switch_mm,
	// switch_to); a CPU that leaves or enters idle pays none of it.
	ContextSwitch time.Duration
	// Wakeup is the latency a wake-up by another thread (try_to_wake_up()
	// from Notify or Close) adds before the wakee runs when it lands on an
	// idle CPU: the IPI to it and its exit from idle. The waker pays
	// nothing and a wakee queued behind a running thread waits for its
	// turn instead (model choices; a timer's wake-up is the idle CPU's own
	// interrupt and pays none).
	Wakeup time.Duration
	// KernelInstructionPS is one instruction of kernel software beyond an
	// entry and exit, in picoseconds: ChargeKernelInstructions' cost.
	KernelInstructionPS int64
	// PostIdle, where set, is what a CPU's first kernel work after it
	// left idle costs beyond its price, by how long the CPU was idle
	// (machine.PostIdle), the points in increasing Idle: interpolated
	// linearly between them (from nothing after no idle), the last
	// point's beyond it. The kernel work is the first charge (Charge,
	// ChargeCost, ChargeKernelInstructions, ChargeCostCondResched,
	// KernelInstruction) by whichever thread runs on the CPU; a return
	// to user first (ChargeUser, ReturnToUser, Point) pays none of it,
	// nor does a memory stall (Stall) or a context switch (model
	// choices).
	PostIdle []IdleCost
}

// IdleCost is one point of SimCosts.PostIdle: after an idle of Idle, the
// first kernel work costs Extra more.
type IdleCost struct {
	Idle, Extra time.Duration
}

// SimNoise is the interruptions of a sim run's busy CPUs (machine.Noise):
// each CPU that runs a thread loses one after an exponentially
// distributed time of mean 1/PerSecond seconds, for a duration drawn
// uniformly from Durations, both from the run's seeded generator. It
// charges the CPU's clock as an interrupt would: the thread's work and
// its reschedules wait for it.
type SimNoise struct {
	PerSecond float64
	Durations []time.Duration
}

// Cost is an event with a fixed cost in a sim run (SimCosts).
type Cost uint8

// The events of ChargeCost.
const (
	CostInt3         Cost = iota // an int3 exception's entry and IRET (exc_int3)
	CostSyscall                  // a syscall's entry and exit (entry_SYSCALL_64)
	CostPageFault                // a page fault's exception entry and exit (exc_page_fault)
	CostPopulatePage             // populating one page (__mm_populate)
	CostIPI                      // one IPI sent and handled (smp_call_function_single)
	CostFork                     // a fork's fixed work (copy_process, dup_mm, wake_up_new_task)
	CostForkPage                 // one present PTE copied by a fork (copy_pte_range: copy_present_pte)
	CostZapPage                  // one present PTE zapped by an unmap (zap_pte_range)
)

// Contexts of a preemption check in sim mode.
const (
	ctxUser  = iota // Point, ChargeUser: return to user
	ctxPoint        // At: a might_resched() / preempt_enable() point of kernel code
	ctxIRQ          // an interrupt inside a kernel Charge
	ctxCond         // a cond_resched() of kernel code
)

// simRun is the sim-mode half of a detRun.
type simRun struct {
	r       *detRun
	preempt Preempt
	tick    int64 // TICK_NSEC
	until   int64
	point   int64
	pointPS int64 // InstructionPS; 0: point
	relax   int64
	costs   [CostZapPage + 1]int64
	forks   []time.Duration // SimCosts.ForkSamples
	kinstPS int64           // SimCosts.KernelInstructionPS
	cswitch int64           // SimCosts.ContextSwitch
	wakeup  int64           // SimCosts.Wakeup
	idle    []IdleCost      // SimCosts.PostIdle
	cpus    []*simCPU
	timers  []simTimer // sleeping threads, by deadline then sequence
	seq     uint64
	pending []*Thread // spawned before Run, activated when it starts
	horizon int64     // the running CPU runs on while its clock is below this
	// userHorizon is horizon for Points: the earliest timer, or the
	// other busy CPUs' earliest clock plus lookahead.
	userHorizon int64
	lookahead   int64     // SimConfig.Lookahead
	ties        []*simCPU // earliest's buffer
	machine     *machine.Description
	mem         any             // package smp's state of the run (SimMemory)
	noiseMean   float64         // ns between two interruptions of a busy CPU; 0: no noise
	noise       []time.Duration // SimNoise.Durations
}

type simTimer struct {
	when int64
	seq  uint64
	t    *Thread
}

// simCPU is a virtual CPU: its clock and run queue (struct rq).
type simCPU struct {
	id       int
	clock    int64 // ns since Epoch; rq_clock_task
	nextTick int64
	// nextNoise is when its next interruption falls due while it is
	// busy (math.MaxInt64: no noise).
	nextNoise int64
	curr      *Thread // rq->curr; nil: idle
	idleFrom  int64   // when it last went idle
	cold      int64   // SimCosts.PostIdle's extra, owed by its next kernel work
	cfs       *fair.RQ
	rt        []*Thread // queued RT threads, best priority first, FIFO within one
	resched   bool      // TIF_NEED_RESCHED
	lazy      bool      // TIF_NEED_RESCHED_LAZY
}

// simThread is a thread's sim-mode state.
type simThread struct {
	se      *fair.Entity
	policy  Policy
	rtPrio  int
	rrLeft  int64 // SCHED_RR time slice left
	tail    bool  // requeue at the tail of its RT priority (yield, RR expiry)
	mask    [MaxSimCPUs / 64]uint64
	started bool
	ps      int64 // picoseconds of Points not yet charged (InstructionPS)
	noise   int64 // ns of interruptions taken while it was its CPU's curr (NoiseTime)
}

func (st *simThread) allowed(cpu int) bool { return st.mask[cpu/64]&(1<<(cpu%64)) != 0 }

func newSim(r *detRun, c *SimConfig) *simRun {
	n := len(r.sys.cpus)
	if n > MaxSimCPUs {
		panic(fmt.Sprintf("sched: %d CPUs: sim mode has at most %d", n, MaxSimCPUs))
	}
	if c.Until <= 0 {
		panic("sched: SimConfig.Until must be positive")
	}
	hz := c.HZ
	if hz <= 0 {
		hz = 250
	}
	f := fair.V6_19()
	if c.Features != nil {
		f = *c.Features
	}
	norm := c.NormalizedSlice
	if norm <= 0 {
		norm = fair.NormalizedBaseSlice
	}
	s := &simRun{r: r, preempt: c.Preempt, tick: int64(time.Second) / int64(hz), until: int64(c.Until),
		point: int64(c.PointCost), relax: int64(c.RelaxCost), pointPS: c.InstructionPS,
		cswitch: int64(c.Costs.ContextSwitch), wakeup: int64(c.Costs.Wakeup), kinstPS: c.Costs.KernelInstructionPS, lookahead: max(int64(c.Lookahead), 0), machine: c.Machine}
	s.costs = [...]int64{CostInt3: int64(c.Costs.Int3), CostSyscall: int64(c.Costs.Syscall), CostPageFault: int64(c.Costs.PageFault),
		CostPopulatePage: int64(c.Costs.PopulatePage), CostIPI: int64(c.Costs.IPI),
		CostFork: int64(c.Costs.Fork), CostForkPage: int64(c.Costs.ForkPage), CostZapPage: int64(c.Costs.ZapPage)}
	s.forks, s.idle = c.Costs.ForkSamples, c.Costs.PostIdle
	if s.point <= 0 {
		s.point = 1
	}
	if s.relax <= 0 {
		s.relax = 140
	}
	if c.Noise.PerSecond > 0 && len(c.Noise.Durations) > 0 {
		s.noiseMean, s.noise = float64(time.Second)/c.Noise.PerSecond, c.Noise.Durations
	}
	for i := range n {
		s.cpus = append(s.cpus, &simCPU{id: i, cfs: fair.NewRQ(f, norm, fair.BaseSlice(norm, n), s.tick), nextNoise: math.MaxInt64})
	}
	return s
}

// armNoise sets c's next interruption after now (none without noise).
func (s *simRun) armNoise(c *simCPU, now int64) {
	if s.noiseMean > 0 {
		c.nextNoise = now + int64(s.r.rng.ExpFloat64()*s.noiseMean)
	}
}

// interrupts takes the ticks and interruptions that fell due on c by its
// clock, in order; an interruption moves the clock on by its duration
// (what ran after it started, a context switch's end, waits for it).
func (s *simRun) interrupts(c *simCPU) {
	for c.clock >= c.nextTick || c.clock >= c.nextNoise {
		if c.nextNoise < c.nextTick {
			d := int64(s.noise[s.r.rng.IntN(len(s.noise))])
			c.clock += d
			if c.curr != nil {
				c.curr.det.sim.noise += d
			}
			s.armNoise(c, c.clock)
			continue
		}
		s.tickCPU(c)
	}
}

// Sim reports whether s runs in sim mode.
func (s *System) Sim() bool { return s.det != nil && s.det.sim != nil }

// Sim reports whether t runs in a sim run.
func (t *Thread) Sim() bool { return t.det != nil && t.det.sim != nil }

func (s *simRun) cpuOf(t *Thread) *simCPU { return s.cpus[t.cpu.ID] }

// spawn gives t its sim state: pinned to its CPU, of the fair class at the
// nice level of its priority. A thread spawned by a running thread starts
// at once (wake_up_new_task()); one spawned before Run when Run starts.
func (s *simRun) spawn(t *Thread) {
	st := &simThread{se: fair.NewEntity(t.prio, t)}
	st.mask[t.cpu.ID/64] |= 1 << (t.cpu.ID % 64)
	t.det.sim = st
	if cur := s.r.cur; cur != nil {
		s.activate(t, s.cpuOf(cur).clock, true, false)
		return
	}
	s.pending = append(s.pending, t)
}

// SetPolicy sets the thread's scheduling policy and, for SCHED_FIFO and
// SCHED_RR, its real-time priority (1..99, higher first). Sim mode only
// (elsewhere a no-op), and only before the thread first runs: a model
// choice, sched_setscheduler() of a running task is left out.
func (t *Thread) SetPolicy(p Policy, rtPrio int) {
	if t.det == nil || t.det.sim == nil {
		return
	}
	st := t.det.sim
	if st.started {
		panic("sched: SetPolicy of a thread that already ran")
	}
	st.policy, st.rtPrio = p, min(max(rtPrio, 1), 99)
}

// SetAffinity lets the thread run on the given CPUs (none: every CPU), as
// sched_setaffinity(). Sim mode only (elsewhere a no-op); it takes effect
// when the thread next wakes up (a model choice: the kernel migrates a
// running task at once through the stopper).
func (t *Thread) SetAffinity(cpus ...int) {
	if t.det == nil || t.det.sim == nil {
		return
	}
	st := t.det.sim
	st.mask = [MaxSimCPUs / 64]uint64{}
	if len(cpus) == 0 {
		cpus = make([]int, len(t.sys().cpus))
		for i := range cpus {
			cpus[i] = i
		}
	}
	for _, c := range cpus {
		st.mask[c/64] |= 1 << (c % 64)
	}
}

// selectCPU is select_task_rq() for a waking or new thread:
// select_task_rq_fair() → select_idle_sibling(), simplified: the target is
// the previous CPU (wake_affine() is left out), taken if idle, else the
// first idle allowed CPU after it (select_idle_cpu() with the whole machine
// one LLC and no SIS_UTIL scan limit), else the target. RT threads are
// placed the same way (select_task_rq_rt()'s lowest-priority search is
// left out).
func (s *simRun) selectCPU(t *Thread) int {
	st := t.det.sim
	n := len(s.cpus)
	target := t.cpu.ID
	if !st.allowed(target) {
		for i := range n {
			if st.allowed(i) {
				target = i
				break
			}
		}
	}
	if s.cpus[target].curr == nil {
		return target
	}
	for i := 1; i < n; i++ {
		if c := (target + i) % n; st.allowed(c) && s.cpus[c].curr == nil {
			return c
		}
	}
	return target
}

// activate wakes t at virtual time when (try_to_wake_up(), or
// wake_up_new_task() if fork): a delayed fair entity is requeued where it
// is queued (ttwu_runnable()); otherwise t is placed (selectCPU), enqueued
// and checked for wake-up preemption, and an idle CPU starts running it,
// SimCosts.Wakeup after when if another thread woke t (woken).
func (s *simRun) activate(t *Thread, when int64, fork, woken bool) {
	st := t.det.sim
	st.started = true
	if st.policy == PolicyNormal && st.se.OnRQ && st.se.Delayed {
		c := s.cpuOf(t)
		c.cfs.Requeue(st.se)
		s.wakeupPreempt(c, t, false)
		return
	}
	flags := 0
	if fork {
		flags = fair.EnqueueInitial
	}
	if cpu := s.selectCPU(t); cpu != t.cpu.ID {
		t.cpu = t.sys().cpus[cpu]
		flags |= fair.EnqueueMigrated
	}
	c := s.cpuOf(t)
	idle := c.curr == nil
	if idle {
		if woken {
			when += s.wakeup
		}
		c.clock = max(c.clock, when)
	}
	if st.policy == PolicyNormal {
		c.cfs.Enqueue(st.se, flags, c.clock)
	} else {
		s.rtEnqueue(c, t, false)
	}
	if idle {
		s.schedule(c, true)
		s.horizon = min(s.horizon, c.clock)
		s.userHorizon = min(s.userHorizon, c.clock+s.lookahead)
		return
	}
	s.wakeupPreempt(c, t, fork)
}

// wakeupPreempt is wakeup_preempt(): a woken RT thread preempts a fair one
// or a worse RT one (resched_curr()); between fair threads
// check_preempt_wakeup_fair() decides (resched_curr_lazy()).
func (s *simRun) wakeupPreempt(c *simCPU, p *Thread, fork bool) {
	curr := c.curr
	if curr == nil || curr == p || c.resched {
		return
	}
	ps, cs := p.det.sim, curr.det.sim
	switch {
	case ps.policy != PolicyNormal:
		if cs.policy == PolicyNormal || ps.rtPrio > cs.rtPrio {
			c.resched = true
		}
	case cs.policy == PolicyNormal:
		if c.cfs.WakeupPreempt(ps.se, fork, c.clock) {
			s.reschedLazy(c)
		}
	}
}

// reschedLazy is resched_curr_lazy(): TIF_NEED_RESCHED_LAZY under the lazy
// model, TIF_NEED_RESCHED otherwise.
func (s *simRun) reschedLazy(c *simCPU) {
	if s.preempt == PreemptLazy {
		c.lazy = true
	} else {
		c.resched = true
	}
}

// rtEnqueue queues t on c's RT list: behind the threads of its priority,
// or before them (a preempted RT task keeps its place at the head).
func (s *simRun) rtEnqueue(c *simCPU, t *Thread, head bool) {
	p := t.det.sim.rtPrio
	i := 0
	for i < len(c.rt) && (c.rt[i].det.sim.rtPrio > p || (!head && c.rt[i].det.sim.rtPrio == p)) {
		i++
	}
	c.rt = slices.Insert(c.rt, i, t)
}

// schedule is __schedule() on c at its clock: the current thread, if it
// blocked or exited, leaves the run queue (dequeue_task(DEQUEUE_SLEEP),
// which DELAY_DEQUEUE may keep queued); otherwise it is put back; then the
// best RT thread runs, else pick_task_fair()'s pick.
func (s *simRun) schedule(c *simCPU, voluntary bool) {
	prev, now := c.curr, c.clock
	if prev != nil {
		ps := prev.det.sim
		gone := prev.det.state != detRunnable
		switch {
		case ps.policy != PolicyNormal:
			ps.se.SumExec += now - ps.se.ExecStart // update_curr_rt()
			if !gone {
				s.rtEnqueue(c, prev, !ps.tail)
			}
			ps.tail = false
		case gone:
			flags := fair.DequeueSleep
			if prev.det.state == detExited {
				flags |= fair.DequeueSpecial // a model choice: an exiting task is not delayed
			}
			c.cfs.Dequeue(ps.se, flags, now)
		}
	}
	var next *Thread
	if len(c.rt) > 0 {
		next = c.rt[0]
		c.rt = c.rt[1:]
		c.cfs.SetNextTask(nil, now)
		st := next.det.sim
		st.se.ExecStart = now
		if st.rrLeft <= 0 {
			st.rrLeft = int64(100 * time.Millisecond) // RR_TIMESLICE
		}
	} else if se := c.cfs.PickTask(now, nil); se != nil {
		c.cfs.SetNextTask(se, now)
		next = se.Owner.(*Thread)
	} else {
		c.cfs.SetNextTask(nil, now)
	}
	c.resched, c.lazy = false, false
	c.curr = next
	switch {
	case prev == nil && next != nil:
		c.nextTick = (now/s.tick + 1) * s.tick // NO_HZ idle: no ticks while idle
		s.armNoise(c, now)                     // nor interruptions that matter
		c.cold = s.postIdle(now - c.idleFrom)
	case prev != nil && next == nil:
		c.idleFrom, c.cold = now, 0
	}
	if prev != nil && next != nil && prev != next && s.cswitch > 0 {
		// context_switch(), charged to next; a tick or an interruption
		// that falls due inside it is taken at its end.
		c.clock += s.cswitch
		s.interrupts(c)
	}
	if prev != nil && prev != next {
		if voluntary {
			if prev.det.state != detRunnable {
				prev.nvcsw.Add(1)
			}
		} else {
			prev.nivcsw.Add(1)
		}
	}
}

// tickCPU is sched_tick() on c at its clock: a lazy reschedule becomes a
// full one, then the current thread's class ticks (task_tick_fair(),
// task_tick_rt()).
func (s *simRun) tickCPU(c *simCPU) {
	c.nextTick += s.tick
	curr := c.curr
	if curr == nil {
		return
	}
	if s.preempt == PreemptLazy && c.lazy {
		c.resched = true
	}
	st := curr.det.sim
	switch st.policy {
	case PolicyNormal:
		if c.cfs.Tick(c.clock) {
			s.reschedLazy(c)
		}
	case PolicyRR:
		st.rrLeft -= s.tick
		if st.rrLeft <= 0 {
			st.rrLeft = int64(100 * time.Millisecond)
			if slices.ContainsFunc(c.rt, func(x *Thread) bool { return x.det.sim.rtPrio == st.rtPrio }) {
				st.tail = true
				c.resched = true
			}
		}
	}
}

// honours reports whether a pending reschedule of c takes effect in
// context ctx under the preemption model: at return to user always (both
// flags); at a kernel preemption point (At) unless the model is none
// (TIF_NEED_RESCHED only: might_resched() under voluntary, preempt_enable()
// under full and lazy); at a cond_resched() under none and voluntary (the
// models that enable it: sched_dynamic_update()); at an interrupt in
// kernel code under full and lazy.
func (s *simRun) honours(c *simCPU, ctx int) bool {
	switch ctx {
	case ctxUser:
		return c.resched || c.lazy
	case ctxPoint:
		return c.resched && s.preempt != PreemptNone
	case ctxCond:
		return c.resched && (s.preempt == PreemptNone || s.preempt == PreemptVoluntary)
	default:
		return c.resched && (s.preempt == PreemptFull || s.preempt == PreemptLazy)
	}
}

// postIdle is SimCosts.PostIdle's extra after an idle of idle ns.
func (s *simRun) postIdle(idle int64) int64 {
	if idle <= 0 {
		return 0
	}
	var i0, e0 int64
	for _, p := range s.idle {
		i1, e1 := int64(p.Idle), int64(p.Extra)
		if idle < i1 {
			return e0 + (e1-e0)*(idle-i0)/(i1-i0)
		}
		i0, e0 = i1, e1
	}
	return e0
}

// firstTimer returns the earliest timer's deadline, or the run's end.
func (s *simRun) firstTimer() int64 {
	if len(s.timers) > 0 {
		return min(s.timers[0].when, s.until)
	}
	return s.until
}

func (s *simRun) addTimer(t *Thread, when int64) {
	s.seq++
	tm := simTimer{when: when, seq: s.seq, t: t}
	i, _ := slices.BinarySearchFunc(s.timers, tm, func(a, b simTimer) int {
		if a.when != b.when {
			return int(min(max(a.when-b.when, -1), 1))
		}
		return int(min(max(int64(a.seq)-int64(b.seq), -1), 1))
	})
	s.timers = slices.Insert(s.timers, i, tm)
}

// earliest returns the busy CPU whose clock is earliest, ties broken by
// the seed; nil if every CPU is idle.
func (s *simRun) earliest() *simCPU {
	s.ties = s.ties[:0]
	for _, c := range s.cpus {
		if c.curr == nil {
			continue
		}
		if len(s.ties) > 0 && c.clock < s.ties[0].clock {
			s.ties = s.ties[:0]
		}
		if len(s.ties) == 0 || c.clock == s.ties[0].clock {
			s.ties = append(s.ties, c)
		}
	}
	switch len(s.ties) {
	case 0:
		return nil
	case 1:
		return s.ties[0]
	}
	return s.ties[s.r.rng.IntN(len(s.ties))]
}

// dispatch is the simulation's step, run by t, the thread that holds the
// baton (nil: Run's goroutine): it fires the timers due, then hands the
// baton to the current thread of the earliest busy CPU, and returns when t
// has it again (handed false if t keeps it). It ends the run when no CPU is
// busy and no timer is set (all exited, or a deadlock) or at Until.
func (s *simRun) dispatch(t *Thread) (handed bool) {
	r := s.r
	for {
		c := s.earliest()
		if len(s.timers) > 0 && s.timers[0].when < s.until && (c == nil || s.timers[0].when <= c.clock) {
			tm := s.timers[0]
			s.timers = s.timers[1:]
			tm.t.det.state = detRunnable
			s.activate(tm.t, tm.when, false, false)
			continue
		}
		if c == nil && len(s.timers) == 0 {
			return r.nothingToRun(t)
		}
		if c == nil || c.clock >= s.until {
			r.rec.TimeLimit = true
			r.fail(t, nil)
			return false
		}
		timer, others := s.firstTimer(), int64(math.MaxInt64)
		for _, o := range s.cpus {
			if o != c && o.curr != nil {
				others = min(others, o.clock)
			}
		}
		s.horizon = min(timer, others)
		s.userHorizon = timer
		if others < math.MaxInt64 {
			s.userHorizon = min(timer, others+s.lookahead)
		}
		next := c.curr
		if next == t {
			return false
		}
		r.steps++
		wait := t != nil && t.det.state != detExited
		if wait {
			t.det.switched = true
		}
		r.cur = next
		detCur.Store(next)
		next.wake <- struct{}{}
		if !wait {
			return true
		}
		<-t.wake
		if r.aborting {
			runtime.Goexit()
		}
		return true
	}
}

// runOn continues t after a decision on its CPU c in context ctx: a
// reschedule that ctx honours preempts t; t keeps the baton while it is
// still c's current thread and c's clock is below the horizon (the rule
// that saves a host hand-off), else it dispatches, and checks for a
// reschedule again each time it gets the baton back (another CPU may have
// asked for one meanwhile).
func (s *simRun) runOn(t *Thread, c *simCPU, ctx int) (handed bool) {
	if s.honours(c, ctx) {
		s.schedule(c, false)
	}
	if c.curr == t && c.clock < s.horizon {
		return false
	}
	for s.dispatch(t) {
		handed = true
		if !s.honours(c, ctx) {
			break
		}
		s.schedule(c, false)
		if c.curr == t {
			break
		}
	}
	return handed
}

// decide is detRun.decide in sim mode.
func (s *simRun) decide(t *Thread, op string) bool {
	if t == nil { // Run starts
		for _, p := range s.pending {
			if p.det.state == detRunnable {
				s.activate(p, 0, true, false)
			}
		}
		s.pending = nil
		return s.dispatch(nil)
	}
	c := s.cpuOf(t)
	switch op {
	case "exit", "block":
		if t.det.state == detSleeping {
			s.addTimer(t, int64(t.det.deadline))
		}
		s.schedule(c, true)
		return s.dispatch(t)
	case "yield":
		if t.det.sim.policy == PolicyNormal {
			c.cfs.Yield(c.clock)
		} else {
			t.det.sim.tail = true
		}
		s.schedule(c, true)
	}
	return s.runOn(t, c, ctxPoint)
}

// charge runs the current thread t for d ns of CPU time in context ctx
// (ctxUser or ctxIRQ): its CPU's clock advances, stopping at each tick of
// the CPU (sched_tick() runs there) and at each timer (which fires once
// every busy CPU has reached it, so the other CPUs run meanwhile); at each
// stop a reschedule that ctx honours preempts t, which resumes the rest
// when it is picked again. Wake-ups and IPIs that other CPUs send t's CPU
// in the meantime take effect at the charge's end: the charge is atomic
// with respect to them (a model choice; the kernel takes the IPI at once).
// Kernel work (ctx not ctxUser) first pays what the CPU owes for its last
// idle (SimCosts.PostIdle); user work clears the debt.
func (s *simRun) charge(t *Thread, d int64, ctx int) {
	c := s.cpuOf(t)
	if c.cold > 0 {
		if ctx != ctxUser {
			d += c.cold
		}
		c.cold = 0
	}
	for {
		if s.honours(c, ctx) {
			s.schedule(c, false)
			if c.curr != t {
				s.dispatch(t)
			}
		}
		if d <= 0 {
			break
		}
		step := max(min(d, c.nextTick-c.clock, c.nextNoise-c.clock, s.firstTimer()-c.clock), 0)
		c.clock += step
		d -= step
		s.interrupts(c)
		if len(s.timers) > 0 && s.timers[0].when <= c.clock || step == 0 && c.clock >= s.until {
			s.dispatch(t) // the timer fires once every CPU has reached it; or the run ends
		}
	}
	s.runOn(t, c, ctx)
}

// reweight is SetPrio in sim mode: reweight_task_fair() to the nice level
// of the new priority.
func (s *simRun) reweight(t *Thread) {
	st := t.det.sim
	if st.policy != PolicyNormal {
		return
	}
	if !st.se.OnRQ {
		st.se.SetNice(t.prio)
		return
	}
	c := s.cpuOf(t)
	c.cfs.Reweight(st.se, t.prio, c.clock)
}

// Charge is d of kernel work by the running thread of a sim run: its
// CPU's virtual clock advances by d. A reschedule that falls due inside
// (at a tick, or by a timer's wake-up) preempts it there only under the
// full and lazy models, as an interrupt return to preemptible kernel code;
// otherwise at the next preemption point. A no-op outside sim mode.
func Charge(d time.Duration) {
	if t := running(); t != nil && t.det.sim != nil {
		t.sys().det.sim.charge(t, int64(d), ctxIRQ)
	}
}

// ChargeCost is n events of kind c by the running thread of a sim run,
// charged as Charge charges kernel work, at the cost SimConfig.Costs gives
// the event (a fork's drawn from ForkSamples where it has them). A no-op
// outside sim mode.
func ChargeCost(c Cost, n int) {
	if t := running(); t != nil && t.det.sim != nil {
		s := t.sys().det.sim
		d := s.costs[c] * int64(n)
		if c == CostFork && len(s.forks) > 0 {
			d = 0
			for range n {
				d += int64(s.forks[s.r.rng.IntN(len(s.forks))])
			}
		}
		if d > 0 {
			s.charge(t, d, ctxIRQ)
		}
	}
}

// ChargeKernelInstructions is n instructions of kernel software by the
// running thread of a sim run, at SimCosts.KernelInstructionPS (rounded to
// the nanosecond), charged as Charge charges kernel work. A no-op outside
// sim mode.
func ChargeKernelInstructions(n int) {
	if t := running(); t != nil && t.det.sim != nil {
		s := t.sys().det.sim
		if d := (s.kinstPS*int64(n) + 500) / 1000; d > 0 {
			s.charge(t, d, ctxIRQ)
		}
	}
}

// ChargeCostCondResched is n events of kind c by the running thread of a
// sim run, in kernel code that calls cond_resched() after each, as the
// per-page loops of __get_user_pages() and copy_pte_range() do: charged
// as ChargeCost charges them, but under the none and voluntary models a
// reschedule that falls due inside takes effect at the end of the event
// it falls in. A no-op outside sim mode.
func ChargeCostCondResched(c Cost, n int) {
	if t := running(); t != nil && t.det.sim != nil {
		s := t.sys().det.sim
		s.chargeEach(t, s.costs[c], n)
	}
}

// chargeEach charges t n events of d ns each with a cond_resched() after
// each: in runs of whole events, each ending with the event during which
// (or at whose end) the CPU's next tick, interruption or timer falls due,
// and a cond_resched() at each run's end.
func (s *simRun) chargeEach(t *Thread, d int64, n int) {
	for d > 0 && n > 0 {
		c := s.cpuOf(t)
		next := min(c.nextTick, c.nextNoise, s.firstTimer()) - c.clock
		k := int(min(int64(n), max((next+d-1)/d, 1)))
		s.charge(t, int64(k)*d, ctxIRQ)
		n -= k
		s.charge(t, 0, ctxCond)
	}
}

// ChargeUser is d of user-mode execution by the running thread of a sim
// run: as Charge, but every model preempts it at a tick or wake-up inside
// (return to user). A no-op outside sim mode.
func ChargeUser(d time.Duration) {
	if t := running(); t != nil && t.det.sim != nil {
		t.sys().det.sim.charge(t, int64(d), ctxUser)
	}
}

// ReturnToUser is the running thread's return to user mode at the end of
// a system call, in a sim run (exit_to_user_mode_loop()): a pending
// reschedule takes effect here under every preemption model, none
// included. It charges nothing. A no-op outside sim mode.
func ReturnToUser() {
	if t := running(); t != nil && t.det.sim != nil {
		t.sys().det.sim.charge(t, 0, ctxUser)
	}
}

// ThreadCPUTime returns, in a sim run, the running thread's virtual CPU
// time (sum_exec_runtime, with its current run) and true; elsewhere 0 and
// false: sched reads no host clock, and a real-time runner reads its OS
// thread's from package host (host.ThreadCPUTime).
func ThreadCPUTime() (time.Duration, bool) {
	if t := running(); t != nil && t.det.sim != nil {
		c := t.sys().det.sim.cpuOf(t)
		se := t.det.sim.se
		return time.Duration(se.SumExec + c.clock - se.ExecStart), true
	}
	return 0, false
}

// NoiseTime returns, in a sim run, the time the running thread has lost
// so far to its CPUs' interruptions (SimConfig.Noise) while it was their
// current thread, and true; elsewhere 0 and false.
func NoiseTime() (time.Duration, bool) {
	if t := running(); t != nil && t.det.sim != nil {
		return time.Duration(t.det.sim.noise), true
	}
	return 0, false
}

// KernelInstruction is one instruction of kernel code by the running
// thread of a sim run (a loop's back edge), at SimConfig.InstructionPS
// (PointCost without it), charged as Charge charges kernel work: unlike
// Point, whose user code may run Lookahead ahead of the other CPUs' clocks,
// kernel code never runs past the earliest other CPU, so that its accesses
// to shared memory happen in causal order. A no-op outside sim mode.
func KernelInstruction() {
	if t := running(); t != nil && t.det.sim != nil {
		s := t.sys().det.sim
		s.instructionIn(t, s.horizon, ctxIRQ)
	}
}

// instructionIn runs t's next instruction in context ctx: its CPU's clock
// advances without leaving t while the instruction ends before horizon
// and the next tick and no reschedule is pending, else it is charged.
func (s *simRun) instructionIn(t *Thread, horizon int64, ctx int) {
	c := s.cpuOf(t)
	d := s.instruction(t)
	if n := c.clock + d; n < c.nextTick && n < c.nextNoise && n < horizon && !c.resched && !c.lazy && c.cold == 0 {
		c.clock = n
		return
	}
	s.charge(t, d, ctx)
}

// instruction is the cost of t's next instruction in ns: PointCost, or
// InstructionPS with the picoseconds below a nanosecond carried to the
// next.
func (s *simRun) instruction(t *Thread) int64 {
	if s.pointPS <= 0 {
		return s.point
	}
	st := t.det.sim
	st.ps += s.pointPS
	d := st.ps / 1000
	st.ps %= 1000
	return d
}

// now is the virtual time of thread t, its CPU's clock: Now in sim mode.
func (s *simRun) now(t *Thread) time.Duration { return time.Duration(s.cpuOf(t).clock) }

// userPoint is Point in sim mode: an instruction of PointCost in user
// mode, without leaving the thread when nothing falls due.
func (s *simRun) userPoint(t *Thread) { s.instructionIn(t, s.userHorizon, ctxUser) }
