package sched

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"mmlab/locking/lockrank"
)

// Config chooses a System's mode at construction.
type Config struct {
	// CPUs is the number of model CPUs (at least one).
	CPUs int
	// Host, in real-time mode, pins each model CPU's OS threads to a host
	// CPU (model CPU i by default to the i-th of Host.CPUs, modulo their
	// number) and gives them host priorities (HostPriority). Without it
	// they are neither: the model does not model the host. Package host
	// implements Host for the runners.
	Host Host
	// Hosts, if set, backs model CPU i in real-time mode by the host CPU
	// Hosts[i] (an index into Host.CPUs, modulo its size), so that a model
	// CPU can have a host CPU to itself while others share one.
	Hosts []int
	// HostPriority, in real-time mode, gives each model thread's OS thread
	// a host scheduling priority in the model's order: a thread of
	// priority p <= 0 runs SCHED_FIFO at real-time priority 1-p (at most
	// 99), one of priority p > 0 SCHED_OTHER at nice p (at most 19). Model
	// CPUs that share a host CPU then share it in the model's order: a
	// normal-priority thread whose host sleep ends runs at once, where
	// among SCHED_OTHER threads of one nice the host would let the running
	// one finish its slice, up to a tick. Setting SCHED_FIFO needs
	// CAP_SYS_NICE (root); without it the thread stays SCHED_OTHER at nice
	// 0, which System.HostPriority reports (as it does without a Host). A
	// model choice: the kernel schedules its tasks itself; a model CPU is
	// host threads.
	HostPriority bool
	// Deterministic selects the deterministic mode (see the package doc):
	// threads are plain goroutines of which exactly one runs at a time,
	// chosen at every preemption point by Seed (or Schedule), in virtual
	// time. Threads start running only in Run.
	Deterministic bool
	// Seed seeds the chooser of a deterministic run.
	Seed uint64
	// Schedule, if not empty, forces the choices of a deterministic run:
	// entry i is the id of the thread to run at the i-th decision that had
	// more than one runnable thread (Record.Schedule's form). Once it is
	// used up, the seeded chooser decides.
	Schedule []int
	// Quantum is how many instruction-boundary Points pass between two
	// decisions (0: DefaultQuantum).
	Quantum int
	// Check, if set, runs at every decision, while no thread runs; an error
	// ends the run (Run returns a *CheckError).
	Check func() error
	// MaxSteps bounds a run's decisions (0: DefaultMaxSteps); a run that
	// passes it ends with ErrMaxSteps (a livelock, or a task that spins).
	MaxSteps int
	// Choose, if set, replaces the seeded chooser (Schedule entries still
	// come first): given the decision, it returns the id of the thread to
	// run, one of c.Runnable. An explorer's strategy (PCT, a replay that
	// runs the current thread on) plugs in here.
	Choose func(c Choice) int
	// Sim, if set, selects sim mode (see the package doc and SimConfig):
	// virtual CPUs with clocks of their own, scheduled as Linux schedules.
	// Deterministic, Schedule, Quantum, MaxSteps and Choose do not apply.
	Sim *SimConfig
}

// Choice is what Config.Choose decides on: the thread From (0 at the start)
// reached a preemption point, or blocked or exited (then it is not in
// Runnable), at decision Step; Runnable are the ids of the threads that
// may run, in id order, at least two. Runnable is valid only during the
// call.
type Choice struct {
	Step     int
	From     int
	Runnable []int
}

// Defaults of Config.
const (
	DefaultQuantum  = 16
	DefaultMaxSteps = 10_000_000
)

// Errors of a deterministic run, usable with errors.Is.
var (
	// ErrDeadlock: every live thread is blocked and none sleeps on the
	// clock. The error is a *DeadlockError.
	ErrDeadlock = errors.New("sched: deadlock")
	// ErrMaxSteps: the run made Config.MaxSteps decisions.
	ErrMaxSteps = errors.New("sched: too many scheduling decisions")
	// ErrSchedule: a forced choice names a thread that is not runnable.
	ErrSchedule = errors.New("sched: schedule names a thread that cannot run")
	// ErrCheck: Config.Check failed. The error is a *CheckError.
	ErrCheck = errors.New("sched: check failed")
)

// Epoch is the virtual clock's time at the start of every deterministic run.
var Epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Held is a lock a thread holds, as locks report it (Acquired,
// AcquiredClass).
type Held struct {
	Lock  any            // the lock's identity
	Name  string         // its name ("mmap_lock")
	Write bool           // held for writing
	Class lockrank.Class // its lock class; lockrank.None: not checked
	Sub   uint8          // the subclass it was taken at (lockdep's)
}

func (h Held) String() string {
	if h.Write {
		return h.Name + "(w)"
	}
	return h.Name + "(r)"
}

// Decision is one scheduling decision of a deterministic run: thread From
// reached a preemption point (Op on Obj, in kernel terms: "down_write" on
// "mmap_lock"), holding Holds, and the chooser picked Next among N runnable
// threads. From is 0 for the start of the run; Op is "exit" when From
// exited, "block" when it went to sleep (Obj says on what).
type Decision struct {
	Step  int
	Now   time.Duration // virtual time since Epoch
	From  int
	Op    string
	Obj   string
	Holds []Held
	Next  int
	N     int
}

// Record is what a deterministic run did: its decisions, in order.
type Record struct {
	Seed      uint64
	Names     map[int]string // thread id → name, for printing
	Decisions []Decision     // none in sim mode
	// End is the virtual time a sim run ended at (its latest CPU clock),
	// and TimeLimit says it ended at SimConfig.Until, not because every
	// thread exited.
	End       time.Duration
	TimeLimit bool
}

// Schedule returns the choices of the decisions that had a choice, the form
// Config.Schedule replays.
func (r *Record) Schedule() []int {
	var s []int
	for _, d := range r.Decisions {
		if d.N > 1 {
			s = append(s, d.Next)
		}
	}
	return s
}

func (r *Record) name(id int) string {
	if id == 0 {
		return "-"
	}
	return fmt.Sprintf("T%d(%s)", id, r.Names[id])
}

// String prints one line per decision.
func (r *Record) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, %d decisions, schedule %v\n", r.Seed, len(r.Decisions), r.Schedule())
	for _, d := range r.Decisions {
		fmt.Fprintf(&b, "%5d %8v %s %s", d.Step, d.Now, r.name(d.From), d.Op)
		if d.Obj != "" {
			fmt.Fprintf(&b, "(%s)", d.Obj)
		}
		if len(d.Holds) > 0 {
			fmt.Fprintf(&b, " holding %v", d.Holds)
		}
		fmt.Fprintf(&b, " -> %s", r.name(d.Next))
		if d.N > 1 {
			fmt.Fprintf(&b, " of %d", d.N)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// ThreadState is a live thread of a deterministic run as Config.Check sees
// it: the preemption point it reached last (Op "block" and Obj what it
// sleeps on, when Blocked), and the locks it holds.
type ThreadState struct {
	ID      int
	Name    string
	Op, Obj string
	Blocked bool // sleeping on a lock or a wake-up, not on the clock
	Holds   []Held
}

// EachThread calls fn with the state of every live thread of a
// deterministic run, in id order; nothing in real-time mode. Call it only
// from Config.Check (no thread runs then) or from the running thread.
func (s *System) EachThread(fn func(ThreadState)) {
	if s.det == nil {
		return
	}
	for _, t := range s.det.threads {
		d := t.det
		if d.state == detExited {
			continue
		}
		fn(ThreadState{ID: t.id, Name: d.name, Op: d.op, Obj: d.obj, Blocked: d.state == detBlocked, Holds: d.holds})
	}
}

// BlockedThread is one thread of a deadlock.
type BlockedThread struct {
	ID      int
	Name    string
	WaitFor string // what it sleeps on ("mmap_lock")
	Holds   []Held
}

// DeadlockError is ErrDeadlock with the blocked threads and, if there is
// one, the wait cycle: each thread of Cycle waits for a lock the next one
// holds, the last for one the first holds.
type DeadlockError struct {
	Blocked []BlockedThread
	Cycle   []BlockedThread
}

func (e *DeadlockError) Error() string {
	var b strings.Builder
	b.WriteString("sched: deadlock: ")
	list := e.Cycle
	if len(list) > 0 {
		b.WriteString("wait cycle: ")
	} else {
		list = e.Blocked
		b.WriteString("all blocked: ")
	}
	for i, t := range list {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "T%d(%s) waits for %s holding %v", t.ID, t.Name, t.WaitFor, t.Holds)
	}
	return b.String()
}

func (e *DeadlockError) Is(target error) bool { return target == ErrDeadlock }

// CheckError is ErrCheck: Config.Check failed at decision Step.
type CheckError struct {
	Step int
	Err  error
}

func (e *CheckError) Error() string {
	return fmt.Sprintf("sched: check failed at decision %d: %v", e.Step, e.Err)
}

func (e *CheckError) Is(target error) bool { return target == ErrCheck }
func (e *CheckError) Unwrap() error        { return e.Err }

// ExemptLockOrder lets a deterministic run built with -tags invariants pass
// the inversions of lockrank.Order that e names: a design that makes them
// on purpose (the model's code that builds the design on s calls it), so
// that what the run is meant to find (a deadlock, a property an explorer
// checks) still shows. Call it before Run; a no-op in real-time mode.
func (s *System) ExemptLockOrder(e lockrank.Exemption) {
	if s.det != nil && !slices.ContainsFunc(s.det.exempt, func(x lockrank.Exemption) bool { return x.Name == e.Name }) {
		s.det.exempt = append(s.det.exempt, e)
	}
}

// LockOrderError is lockrank.ErrOrder in a deterministic run built with
// -tags invariants: thread Thread took Lock holding Holds, after decision
// Step.
type LockOrderError struct {
	Step   int
	Thread int
	Name   string
	Holds  []Held
	Lock   Held
	Err    error // a *lockrank.OrderError
}

func (e *LockOrderError) Error() string {
	return fmt.Sprintf("sched: T%d(%s) takes %v holding %v after decision %d: %v", e.Thread, e.Name, e.Lock, e.Holds, e.Step, e.Err)
}

func (e *LockOrderError) Unwrap() error { return e.Err }

// RunError is the error Run returns: what ended the run, with the seed and
// the decisions that led to it, so that a failing test can print them.
type RunError struct {
	Err    error
	Record *Record
}

func (e *RunError) Error() string {
	return fmt.Sprintf("%v (seed %d, schedule %v)", e.Err, e.Record.Seed, e.Record.Schedule())
}
func (e *RunError) Unwrap() error { return e.Err }

// States of a thread in a deterministic run.
const (
	detNew      = iota // spawned, not yet run
	detRunnable        // may be chosen (the running thread included)
	detBlocked         // parked on channels until woken
	detSleeping        // parked until the clock reaches its deadline
	detExited
)

// detThread is a Thread's state in a deterministic run. Only the running
// thread, or Run's goroutine while no thread runs, touches it.
type detThread struct {
	name     string
	state    int
	waitOn   [2]<-chan struct{} // channels a blocked thread sleeps on
	waitLock any                // the lock a blocked thread waits for, if any
	waitFor  string             // its name, for the record
	deadline time.Duration      // a sleeping thread's wake-up time
	holds    []Held             // replaced, never modified: decisions share it
	op, obj  string             // the preemption point it reached last
	points   int                // instruction-boundary Points, for Quantum
	switched bool               // gave up the baton since Resumed was called
	goid     uint64             // the goroutine's id, with the invariants tag
	sim      *simThread         // sim-mode state; nil in deterministic mode
}

// detRun is the state of a System's deterministic run.
type detRun struct {
	sys      *System
	cfg      Config
	rng      *rand.Rand
	quantum  int
	maxSteps int

	threads  []*Thread // every thread, by id
	runnable []*Thread // detRunnable threads, by id
	waiting  map[<-chan struct{}][]*Thread
	cur      *Thread // the thread holding the baton; nil when Run's goroutine has it
	now      time.Duration
	forced   int   // Schedule entries used
	ids      []int // Choice.Runnable's buffer
	rec      Record
	steps    int          // decisions recorded
	chunks   [][]Decision // the decisions, in chunks so that recording one never copies the others
	started  bool
	aborting bool
	err      error
	ctl      chan struct{}        // hands the baton back to Run's goroutine
	exempt   []lockrank.Exemption // ExemptLockOrder
	sim      *simRun              // sim mode; nil in deterministic mode
}

// detMu serialises deterministic runs in the process; detCur is the thread
// that runs in the active one (nil if none). Model code that has no thread
// at hand (locks, clocks) finds the run through detCur.
//
// detCur is the model's one process-wide state, kept on purpose: At,
// Relax, Now, Wait and the locks' Acquired and Released, called from every
// model package (mm, locking, rcu, uprobes, kernel, procfs), find the
// running thread here; threading a handle through every caller of At costs
// more than it buys. Because of it deterministic runs in one process take
// turns (detMu), and no model code may run in real-time mode in the
// process while one is active.
var (
	detMu  sync.Mutex
	detCur atomic.Pointer[Thread]
)

// New returns a System as cfg says.
func New(cfg Config) *System {
	s := NewSystem(cfg.CPUs)
	if cfg.Host != nil && !cfg.Deterministic {
		s.host, s.hostPrio = cfg.Host, cfg.HostPriority
		if hosts, err := cfg.Host.CPUs(); err == nil && len(hosts) > 0 {
			for i, c := range s.cpus {
				h := i
				if i < len(cfg.Hosts) {
					h = cfg.Hosts[i]
				}
				c.Host = hosts[h%len(hosts)]
			}
		}
	}
	if cfg.Deterministic || cfg.Sim != nil {
		r := &detRun{sys: s, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x6d6d6c6162)),
			quantum: cfg.Quantum, maxSteps: cfg.MaxSteps,
			waiting: make(map[<-chan struct{}][]*Thread), ctl: make(chan struct{})}
		if r.quantum <= 0 {
			r.quantum = DefaultQuantum
		}
		if r.maxSteps <= 0 {
			r.maxSteps = DefaultMaxSteps
		}
		r.rec.Seed = cfg.Seed
		r.rec.Names = map[int]string{}
		s.det = r
		if cfg.Sim != nil {
			r.sim = newSim(r, cfg.Sim)
		}
	}
	return s
}

// Deterministic reports whether s runs in deterministic mode.
func (s *System) Deterministic() bool { return s.det != nil }

// spawn registers t with the run; it starts when the chooser picks it.
func (r *detRun) spawn(t *Thread, name string, fn func(*Thread)) {
	t.det = &detThread{name: name, state: detRunnable}
	r.threads = append(r.threads, t)
	r.rec.Names[t.id] = name
	if r.sim != nil {
		r.sim.spawn(t)
	} else {
		r.addRunnable(t)
	}
	go t.runDet(fn)
}

func (t *Thread) runDet(fn func(*Thread)) {
	if invariants {
		t.det.goid = goid()
	}
	<-t.wake
	defer t.exitDet()
	if !t.sys().det.aborting {
		fn(t)
	}
}

// exitDet ends t, normally or when a run is aborted (runtime.Goexit).
func (t *Thread) exitDet() {
	r := t.sys().det
	if t.Trc.Nesting != 0 && !r.aborting {
		panic(fmt.Sprintf("sched: thread %d exits inside an RCU Tasks Trace read section (nesting %d)", t.id, t.Trc.Nesting))
	}
	t.det.state = detExited
	r.removeRunnable(t)
	t.sys().forget(t)
	if r.aborting {
		r.ctl <- struct{}{}
		return
	}
	r.decide(t, "exit", "")
}

// Run runs the threads of a deterministic System until all have exited,
// and returns the record of its decisions. It fails with a *RunError whose
// Err is a *DeadlockError, a *CheckError, ErrMaxSteps, ErrSchedule or
// (with -tags invariants) a *LockOrderError; the threads still live then are ended (their goroutines exit through
// runtime.Goexit, running their deferred calls). Deterministic runs of one
// process are serialised. Call Run once, from outside the model.
func (s *System) Run() (*Record, error) {
	r := s.det
	if r == nil {
		panic("sched: Run on a real-time System")
	}
	if r.started {
		panic("sched: Run called twice")
	}
	detMu.Lock()
	defer detMu.Unlock()
	r.started = true
	if r.sim != nil {
		atomic.StoreUint32(&SimRunning, 1)
		defer atomic.StoreUint32(&SimRunning, 0)
	}
	if len(r.runnable) > 0 || r.sim != nil {
		if r.decide(nil, "start", "") { // the baton went to a thread
			<-r.ctl
		}
	}
	if r.aborting {
		for _, t := range r.threads {
			if t.det.state != detExited {
				r.cur = t
				detCur.Store(t)
				t.wake <- struct{}{}
				<-r.ctl
			}
		}
	}
	r.cur = nil
	detCur.Store(nil)
	if r.sim != nil {
		for _, c := range r.sim.cpus {
			r.rec.End = max(r.rec.End, time.Duration(c.clock))
		}
	}
	r.rec.Decisions = slices.Concat(r.chunks...)
	r.chunks = nil
	if r.err != nil {
		return &r.rec, &RunError{Err: r.err, Record: &r.rec}
	}
	return &r.rec, nil
}

func (r *detRun) addRunnable(t *Thread) {
	i, _ := slices.BinarySearchFunc(r.runnable, t.id, func(x *Thread, id int) int { return x.id - id })
	r.runnable = slices.Insert(r.runnable, i, t)
}

func (r *detRun) removeRunnable(t *Thread) {
	if i := slices.Index(r.runnable, t); i >= 0 {
		r.runnable = slices.Delete(r.runnable, i, i+1)
	}
}

// decide is a scheduling decision by t (nil: Run's goroutine at the start),
// which holds the baton and reached op on obj. It picks the next thread and
// hands it the baton; t, if still runnable or parked, waits until it is
// chosen again. A run that must end is aborted here.
func (r *detRun) decide(t *Thread, op, obj string) (handed bool) {
	if r.aborting {
		if t != nil && t.det.state != detExited {
			runtime.Goexit()
		}
		return false
	}
	if invariants && t != nil && t.det.state != detExited && t.det.goid != goid() {
		panic(fmt.Sprintf("sched: goroutine %d is not T%d(%s), the running thread: model code ran outside the deterministic run", goid(), t.id, t.det.name))
	}
	step := r.steps + 1
	if t != nil {
		t.det.op, t.det.obj = op, obj
	}
	if r.cfg.Check != nil {
		if err := r.cfg.Check(); err != nil {
			r.fail(t, &CheckError{Step: step, Err: err})
			return false
		}
	}
	if r.sim != nil {
		return r.sim.decide(t, op)
	}
	if step > r.maxSteps {
		r.fail(t, ErrMaxSteps)
		return false
	}
	for len(r.runnable) == 0 && r.advanceClock() {
	}
	d := Decision{Step: step, Now: r.now, Op: op, Obj: obj, N: len(r.runnable)}
	if t != nil {
		d.From, d.Holds = t.id, t.det.holds
	}
	if len(r.runnable) == 0 {
		r.record(d)
		return r.nothingToRun(t)
	}
	var next *Thread
	if d.N == 1 {
		next = r.runnable[0]
	} else if r.forced < len(r.cfg.Schedule) {
		id := r.cfg.Schedule[r.forced]
		r.forced++
		if i := slices.IndexFunc(r.runnable, func(x *Thread) bool { return x.id == id }); i >= 0 {
			next = r.runnable[i]
		} else {
			r.record(d)
			r.fail(t, fmt.Errorf("%w: T%d at decision %d", ErrSchedule, id, step))
			return false
		}
	} else if r.cfg.Choose != nil {
		r.ids = r.ids[:0]
		for _, x := range r.runnable {
			r.ids = append(r.ids, x.id)
		}
		id := r.cfg.Choose(Choice{Step: step, From: d.From, Runnable: r.ids})
		i := slices.IndexFunc(r.runnable, func(x *Thread) bool { return x.id == id })
		if i < 0 {
			r.record(d)
			r.fail(t, fmt.Errorf("%w: T%d chosen at decision %d", ErrSchedule, id, step))
			return false
		}
		next = r.runnable[i]
	} else {
		next = r.runnable[r.rng.IntN(d.N)]
	}
	d.Next = next.id
	r.record(d)
	if next == t {
		return false
	}
	r.switchTo(t, next)
	return true
}

// recordChunk is how many decisions a chunk of detRun.chunks holds at
// most; the first holds firstChunk and each next one twice as many, so that
// a short run (an explorer runs many) allocates little.
const (
	recordChunk = 4096
	firstChunk  = 128
)

// record appends d to the run's decisions.
func (r *detRun) record(d Decision) {
	r.steps++
	if n := len(r.chunks); n == 0 || len(r.chunks[n-1]) == cap(r.chunks[n-1]) {
		size := recordChunk
		if n < bits.Len(recordChunk/firstChunk) { // firstChunk<<n would overflow for a long run
			size = firstChunk << n
		}
		r.chunks = append(r.chunks, make([]Decision, 0, size))
	}
	c := &r.chunks[len(r.chunks)-1]
	*c = append(*c, d)
}

// switchTo hands the baton from t (nil: Run's goroutine) to next and, if t
// is live, waits for it to come back.
func (r *detRun) switchTo(t, next *Thread) {
	// Everything about t is settled before the send: next may change it.
	wait := t != nil && t.det.state != detExited
	if wait {
		if t.det.state == detRunnable {
			t.nivcsw.Add(1) // preempted at a point
		} else {
			t.nvcsw.Add(1) // went to sleep
		}
		t.det.switched = true
	}
	r.cur = next
	detCur.Store(next)
	next.wake <- struct{}{}
	if !wait {
		return
	}
	<-t.wake
	if r.aborting {
		runtime.Goexit()
	}
}

// fail ends the run with err: t (nil: Run's goroutine) gives the baton
// back to Run, which ends every live thread.
func (r *detRun) fail(t *Thread, err error) {
	r.err = err
	r.aborting = true
	r.cur = nil
	detCur.Store(nil)
	if t == nil {
		return
	}
	if t.det.state == detExited {
		r.ctl <- struct{}{}
		return
	}
	runtime.Goexit() // exitDet hands the baton to Run
}

// advanceClock moves the clock to the earliest deadline of a sleeping
// thread and makes the threads due runnable; false if none sleeps.
func (r *detRun) advanceClock() bool {
	first := time.Duration(-1)
	for _, t := range r.threads {
		if t.det.state == detSleeping && (first < 0 || t.det.deadline < first) {
			first = t.det.deadline
		}
	}
	if first < 0 {
		return false
	}
	r.now = max(r.now, first)
	for _, t := range r.threads {
		if t.det.state == detSleeping && t.det.deadline <= r.now {
			t.det.state = detRunnable
			r.addRunnable(t)
		}
	}
	return true
}

// nothingToRun ends the run when no thread can run, as t (nil: Run's
// goroutine) finds: a deadlock if threads are left, else the end, every
// thread having exited. It returns false: t keeps no baton.
func (r *detRun) nothingToRun(t *Thread) bool {
	if live := r.liveThreads(); len(live) > 0 {
		r.fail(t, r.deadlock(live))
		return false
	}
	r.cur = nil
	detCur.Store(nil)
	if t != nil {
		r.ctl <- struct{}{} // every thread has exited
	}
	return false
}

func (r *detRun) liveThreads() []*Thread {
	var live []*Thread
	for _, t := range r.threads {
		if t.det.state != detExited {
			live = append(live, t)
		}
	}
	return live
}

// deadlock describes the blocked threads and finds a wait cycle among
// them: an edge from each thread to the holders of the lock it waits for.
func (r *detRun) deadlock(live []*Thread) *DeadlockError {
	e := &DeadlockError{}
	bt := func(t *Thread) BlockedThread {
		return BlockedThread{ID: t.id, Name: t.det.name, WaitFor: t.det.waitFor, Holds: t.det.holds}
	}
	for _, t := range live {
		e.Blocked = append(e.Blocked, bt(t))
	}
	holders := func(t *Thread) []*Thread {
		var hs []*Thread
		if t.det.waitLock == nil {
			return nil
		}
		for _, h := range live {
			if h != t && slices.ContainsFunc(h.det.holds, func(x Held) bool { return x.Lock == t.det.waitLock }) {
				hs = append(hs, h)
			}
		}
		return hs
	}
	// Depth-first search from each thread, in id order.
	for _, start := range live {
		path := []*Thread{start}
		var walk func(t *Thread) bool
		walk = func(t *Thread) bool {
			for _, h := range holders(t) {
				if h == start {
					return true
				}
				if slices.Contains(path, h) {
					continue
				}
				path = append(path, h)
				if walk(h) {
					return true
				}
				path = path[:len(path)-1]
			}
			return false
		}
		if walk(start) {
			for _, t := range path {
				e.Cycle = append(e.Cycle, bt(t))
			}
			break
		}
	}
	return e
}

// park puts the running thread t to sleep in state (detBlocked or
// detSleeping) and runs others until it is woken.
func (r *detRun) park(t *Thread, state int) {
	t.det.state = state
	r.removeRunnable(t)
	r.decide(t, "block", t.det.waitFor)
}

// wake makes a blocked thread runnable.
func (r *detRun) wake(t *Thread) {
	if t.det.state != detBlocked {
		return
	}
	for _, ch := range t.det.waitOn {
		if ch != nil {
			r.unwait(ch, t)
		}
	}
	t.det.waitOn = [2]<-chan struct{}{}
	t.det.state = detRunnable
	if r.sim != nil {
		r.sim.activate(t, int64(r.sim.now(r.cur)), false, true)
		return
	}
	r.addRunnable(t)
}

func (r *detRun) unwait(ch <-chan struct{}, t *Thread) {
	ws := r.waiting[ch]
	if i := slices.Index(ws, t); i >= 0 {
		ws = slices.Delete(ws, i, i+1)
	}
	if len(ws) == 0 {
		delete(r.waiting, ch)
	} else {
		r.waiting[ch] = ws
	}
}

// wakeWaiters wakes the threads blocked on ch, first blocked first.
func (r *detRun) wakeWaiters(ch <-chan struct{}) {
	ws := r.waiting[ch]
	if len(ws) == 0 {
		return
	}
	for _, t := range slices.Clone(ws) {
		r.wake(t)
	}
}

// running returns the thread of the active deterministic run, or nil.
// Every model wait and clock read goes through it.
func running() *Thread { return detCur.Load() }

// Current returns the running thread of the active deterministic run, nil
// in real-time mode (or outside the model).
func Current() *Thread { return running() }

// Active reports whether a deterministic run is active: hot paths call At,
// Acquired and Released only then, so that real-time mode pays one load.
func Active() bool { return detCur.Load() != nil }

// At is a preemption point of kernel code: op on obj in kernel terms
// ("down_write", "mmap_lock"; "rcu_read_lock_trace", ""). In a
// deterministic run the chooser may switch to another thread here; in
// real-time mode it does nothing.
func At(op, obj string) {
	if t := running(); t != nil {
		t.at(op, obj)
	}
}

// Relax is one turn of a spin-wait loop, the kernel's cpu_relax(): in a
// deterministic run a preemption point named op, so that the thread being
// waited for can run; otherwise it yields the processor (runtime.Gosched).
func Relax(op string) {
	if t := running(); t != nil {
		if s := t.sys().det.sim; s != nil {
			s.charge(t, s.relax, ctxIRQ)
		}
		t.at(op, "")
		return
	}
	runtime.Gosched()
}

// at is At on the running thread t, out of line so that At inlines.
func (t *Thread) at(op, obj string) { t.sys().det.decide(t, op, obj) }

// Acquired tells the deterministic run that the running thread now holds
// lock (named name): the record shows it and deadlocks are traced through
// it. A no-op in real-time mode.
func Acquired(lock any, name string, write bool) {
	if t := running(); t != nil {
		t.acquired(Held{Lock: lock, Name: name, Write: write}, false) // lockrank.None: not checked
	}
}

// AcquiredClass is Acquired of a lock of class c taken at subclass sub.
// Built with -tags invariants, an acquisition that is not a trylock (try)
// is checked against the locks the thread holds (lockrank.Check): one that
// breaks lockrank.Order ends the run with a *LockOrderError, unless an
// exemption of the System allows it (ExemptLockOrder).
func AcquiredClass(lock any, name string, write bool, c lockrank.Class, sub uint8, try bool) {
	if t := running(); t != nil {
		t.acquired(Held{Lock: lock, Name: name, Write: write, Class: c, Sub: sub}, try)
	}
}

func (t *Thread) acquired(h Held, try bool) {
	if invariants && !try {
		t.checkOrder(h)
	}
	t.det.holds = append(slices.Clip(t.det.holds), h)
}

// checkOrder fails the run if t may not take h holding what it holds.
func (t *Thread) checkOrder(h Held) {
	r := t.sys().det
	for _, o := range t.det.holds {
		err := lockrank.Check(o.Class, o.Sub, h.Class, h.Sub)
		if err == nil || slices.ContainsFunc(r.exempt, func(e lockrank.Exemption) bool { return e.Allows(o.Class, h.Class) }) {
			continue
		}
		r.fail(t, &LockOrderError{Step: r.steps, Thread: t.id, Name: t.det.name, Holds: t.det.holds, Lock: h, Err: err})
	}
}

// Released is the counterpart of Acquired: the running thread let go of one
// hold of lock. A lock released by a thread that did not take it (a
// percpu-rwsem read lock may be) is dropped from the thread that holds it.
func Released(lock any) {
	if t := running(); t != nil {
		t.released(lock)
	}
}

func (t *Thread) released(lock any) {
	if dropHold(t, lock) {
		return
	}
	for _, o := range t.sys().det.threads {
		if dropHold(o, lock) {
			return
		}
	}
}

func dropHold(t *Thread, lock any) bool {
	h := t.det.holds
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Lock == lock {
			t.det.holds = slices.Concat(h[:i], h[i+1:])
			return true
		}
	}
	return false
}

// Now returns the model's clock: in a deterministic run the virtual time
// (Epoch plus the time the run has advanced), else the wall clock. The
// virtual clock advances only when every live thread sleeps on it. In a
// sim run it is the running thread's CPU's clock.
func Now() time.Time {
	if t := running(); t != nil {
		if s := t.sys().det.sim; s != nil {
			return Epoch.Add(s.now(t))
		}
		return Epoch.Add(t.sys().det.now)
	}
	return time.Now()
}

// Since is Now().Sub(t0).
func Since(t0 time.Time) time.Duration { return Now().Sub(t0) }

// Sleep sleeps for d on the model's clock: in a deterministic run the
// running thread parks until the virtual clock has advanced by d (which it
// does once every thread is blocked or sleeping); else time.Sleep.
func Sleep(d time.Duration) {
	t := running()
	if t == nil {
		time.Sleep(d)
		return
	}
	r := t.sys().det
	t.det.deadline = r.now + d
	if r.sim != nil {
		t.det.deadline = r.sim.now(t) + d
	}
	t.det.waitFor, t.det.waitLock = fmt.Sprintf("sleep %v", d), nil
	r.park(t, detSleeping)
}

// TimerSlack is a normal task's default timer slack (the kernel's
// init_task.timer_slack_ns, 50 µs): how far past its expiry a sleep's
// hrtimer may fire, so that timers close together expire with one
// interrupt.
const TimerSlack = 50 * time.Microsecond

// Nanosleep is a user task's nanosleep(2) (or any sleep on an hrtimer
// with its slack): Sleep for d, and in a sim run for d plus the timer
// slack if the thread is in the fair class (hrtimer_nanosleep() arms the
// timer with hrtimer_set_expires_range_ns(..., current->timer_slack_ns);
// __setscheduler_params() sets an RT task's timer_slack_ns to 0). A model
// choice: the timer fires at its hard expiry, as it does when no other
// interrupt of the CPU falls in the slack (a tick in it would end the
// sleep earlier). A task whose slack was set (prctl(PR_SET_TIMERSLACK))
// sleeps with Sleep.
func Nanosleep(d time.Duration) {
	if t := running(); t != nil && t.Sim() && t.det.sim.policy == PolicyNormal {
		d += TimerSlack
	}
	Sleep(d)
}

// Wait sleeps until ch or fatal (either may be nil) can be received from,
// and reports which: 0 for ch, 1 for fatal (ch first if both can). It is
// how model code sleeps: a receive from a channel that wakers send to
// (Notify) or close (Close). lock and name say what the sleep waits for
// (lock's identity may be nil), for the record and deadlock reports. In a
// deterministic run the running thread parks until a Notify or Close of one
// of the channels by another thread; else it is a plain select.
func Wait(lock any, name string, ch, fatal <-chan struct{}) int {
	t := running()
	if t == nil {
		select {
		case <-ch:
			return 0
		case <-fatal:
			return 1
		}
	}
	r := t.sys().det
	for {
		if TryRecv(ch) {
			return 0
		}
		if TryRecv(fatal) {
			return 1
		}
		t.det.waitOn = [2]<-chan struct{}{ch, fatal}
		t.det.waitFor, t.det.waitLock = name, lock
		for _, c := range t.det.waitOn {
			if c != nil {
				r.waiting[c] = append(r.waiting[c], t)
			}
		}
		r.park(t, detBlocked)
	}
}

// TryRecv receives from ch if it can without blocking (a closed ch always
// can); a nil ch never can.
func TryRecv(ch <-chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Notify sends a wake-up on the one-slot channel ch without blocking (a
// wake-up already pending absorbs it) and, in a deterministic run, makes
// the threads waiting on ch runnable. Mirrors wake_up_process().
//
// The running thread is read before the wake-up: a goroutine outside the
// model (a real-time test's) whose wake-up lets a deterministic run start
// must not find that run's thread afterwards and touch its state.
func Notify(ch chan struct{}) {
	t := running()
	select {
	case ch <- struct{}{}:
	default:
	}
	if t != nil {
		t.sys().det.wakeWaiters(ch)
	}
}

// Close closes ch and, in a deterministic run, makes the threads waiting on
// it runnable: a broadcast wake-up (complete_all(), wake_up_all()).
// The running thread is read before the close, as in Notify.
func Close(ch chan struct{}) {
	t := running()
	close(ch)
	if t != nil {
		t.sys().det.wakeWaiters(ch)
	}
}

// Resumed reports whether, in a deterministic run, the thread gave up the
// baton since the last call (other threads ran meanwhile): a Runner then
// reloads its TLB as after a sleep. Always false in real-time mode.
func (t *Thread) Resumed() bool {
	if t.det == nil || !t.det.switched {
		return false
	}
	t.det.switched = false
	return true
}

// Name returns the thread's name (SpawnNamed), "" if it has none.
func (t *Thread) Name() string {
	if t.det != nil {
		return t.det.name
	}
	return t.name
}

// detPoint is Point in deterministic mode: every Quantum-th call is a
// decision.
func (t *Thread) detPoint() {
	r := t.sys().det
	if r.sim != nil {
		r.sim.userPoint(t)
		return
	}
	t.det.points++
	if t.det.points%r.quantum == 0 {
		r.decide(t, "point", "")
	}
}

// stop ends the threads that never ran: all of a run that never started,
// and those spawned after Run returned (an RCU callback worker that model
// code started from outside the run, while tearing a scenario down).
func (r *detRun) stop() {
	detMu.Lock()
	defer detMu.Unlock()
	r.started, r.aborting = true, true
	for _, t := range r.threads {
		if t.det.state != detExited {
			t.wake <- struct{}{}
			<-r.ctl
		}
	}
}

// Deterministic reports whether t is a thread of a deterministic run.
func (t *Thread) Deterministic() bool { return t.det != nil }

// At is the package-level At for code that has t, the running thread, at
// hand (the read sides of package rcu): in real-time mode it costs one
// load of a field of t.
func (t *Thread) At(op, obj string) {
	if t.det != nil {
		t.at(op, obj)
	}
}

// goid returns the calling goroutine's id, from its stack header
// ("goroutine 42 [running]:"), for the invariants checks.
func goid() uint64 {
	var buf [32]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = b[len("goroutine "):]
	var id uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
