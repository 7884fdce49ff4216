// Package kernel models tasks (struct task_struct): threads, the thread
// groups (processes) they form, their pending signals, the model CPU they run
// on, and how long each was blocked on which lock.
//
// A Task is what the locks of package locking see of a task: it implements
// locking.Waiter (Fatal, CPU), locking.BlockRecorder and, when it runs on a
// model thread of package sched, locking.Blocker.
//
// Lock order: ThreadGroup.mu and Task.blockedMu are leaves; neither is held
// while taking any other lock, and neither is taken under a lock's internal
// wait lock (locks call RecordBlocked after their wait ends).
package kernel

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"mmlab/errno"
	"mmlab/locking"
	"mmlab/mm"
	"mmlab/sched"
)

// Signal is a Linux (x86-64) signal number: errno.Signal, the one type the
// CPU's faults, the address space's accesses and the tasks' pending signals
// share.
type Signal = errno.Signal

// The signals the model raises (errno has their numbers and names).
const (
	SIGTRAP = errno.SIGTRAP
	SIGBUS  = errno.SIGBUS
	SIGKILL = errno.SIGKILL
	SIGSEGV = errno.SIGSEGV
)

// synchronousMask is the kernel's SYNCHRONOUS_MASK: signals caused by the
// instruction the task executes (SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGFPE,
// SIGSYS), dequeued before any other.
const synchronousMask uint64 = 1<<(11-1) | 1<<(7-1) | 1<<(4-1) | 1<<(5-1) | 1<<(8-1) | 1<<(31-1)

// sigmask is the bit of sig in a pending-signal set.
func sigmask(sig Signal) uint64 {
	if sig < 1 || sig > 64 {
		panic(fmt.Sprintf("kernel: invalid signal %d", int(sig)))
	}
	return 1 << (sig - 1)
}

// Namespace is the numbering of one model kernel: its tasks' ids, from 1
// up as alloc_pid() gives them in one pid namespace (but never reused),
// and the numbering of its address spaces and inodes (MM). A task knows
// its namespace: its threads and forks draw from it. Two namespaces share
// nothing, so runs in one process each number their tasks as a fresh
// process would. The zero value is ready to use; a Machine has one.
type Namespace struct {
	lastPID atomic.Int64
	// MM numbers the address spaces of the namespace's tasks and the
	// inodes they map.
	MM mm.Namespace
}

// allocPID mirrors kernel/pid.c:alloc_pid(): the next id of ns.
func (ns *Namespace) allocPID() int { return int(ns.lastPID.Add(1)) }

// ThreadGroup is a process: the threads that share an address space and a
// fatal signal (the kernel's struct signal_struct, for what the model needs).
type ThreadGroup struct {
	TGID int

	mu      sync.Mutex // protects threads and killed; a leaf lock
	threads []*Task
	killed  bool // SIGNAL_GROUP_EXIT: a fatal signal took the group down
}

// Threads returns the group's threads, leader first.
func (g *ThreadGroup) Threads() []*Task {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]*Task(nil), g.threads...)
}

// BlockStat is a task's time blocked on one lock.
type BlockStat struct {
	Count int64         // waits
	Total time.Duration // total time blocked
	Max   time.Duration // longest wait
}

// Task is a thread: the kernel's struct task_struct.
type Task struct {
	TID   int
	Group *ThreadGroup
	Comm  string

	ns *Namespace // where TID came from; its threads and forks draw from it

	// MM is the address space the thread group shares (tsk->mm); nil for
	// a kernel thread. Set with the task (NewTaskMM, Fork); threads share
	// it and hold a user reference each (mm_users).
	MM *mm.MM

	// Thread is the model thread the task runs as, or nil for a task that
	// runs on a plain goroutine. Set before the task runs; not changed
	// afterwards. With a Thread, CPU is the thread's and locks sleep
	// through Thread.Block.
	Thread *sched.Thread

	// uprobes are the process's kernel's uprobes as fork sees them
	// (NewTaskMMWith), nil for a kernel without; set with the task,
	// inherited by its forks and threads, never changed.
	uprobes *Config

	// pkru is the thread's PKRU register (its XSAVE state): InitPKRU for
	// a new task, as after execve(); clone and fork copy it. Only the
	// thread itself, and the mm operations it calls, touch it.
	pkru mm.PKRU

	cpu     atomic.Int32  // model CPU when Thread is nil; -1 for none
	pending atomic.Uint64 // pending signals: bit sig-1 (struct sigpending)
	killed  atomic.Bool   // a fatal signal is pending (fatal_signal_pending)
	fatal   chan struct{} // closed once, when killed becomes true
	once    sync.Once     // closes fatal

	blockedMu sync.Mutex // protects blocked; a leaf lock
	blocked   map[string]BlockStat
}

var (
	_ locking.Waiter        = (*Task)(nil)
	_ locking.BlockRecorder = (*Task)(nil)
	_ locking.Blocker       = (*Task)(nil)
)

// NewTask returns a new single-threaded process of ns named comm, not on
// any model CPU: its TID is its TGID.
func NewTask(ns *Namespace, comm string) *Task {
	id := ns.allocPID()
	g := &ThreadGroup{TGID: id}
	t := newTask(ns, id, g, comm)
	t.cpu.Store(-1)
	g.threads = []*Task{t}
	return t
}

func newTask(ns *Namespace, tid int, g *ThreadGroup, comm string) *Task {
	return &Task{TID: tid, Group: g, Comm: comm, ns: ns, pkru: mm.InitPKRU, fatal: make(chan struct{})}
}

// PKRU returns the thread's PKRU register (mm.PKRUHolder): the mm
// operations it calls read and write it as the kernel does current's. A
// nil Task, a caller that is no task, has none.
func (t *Task) PKRU() *mm.PKRU {
	if t == nil {
		return nil
	}
	return &t.pkru
}

// NewThread returns a new thread in t's thread group (clone with
// CLONE_THREAD), on t's CPU. A thread born into a group that a fatal signal
// has already taken down is killed too, so every thread of a killed group
// sees it.
func (t *Task) NewThread() *Task {
	nt := newTask(t.ns, t.ns.allocPID(), t.Group, t.Comm)
	nt.cpu.Store(t.cpu.Load())
	nt.pkru = t.pkru // copy_thread: the FPU state, PKRU with it, is copied
	nt.uprobes = t.uprobes
	if nt.MM = t.MM; nt.MM != nil {
		nt.MM.Users.Add(1) // CLONE_VM: mmget
	}
	g := t.Group
	g.mu.Lock()
	g.threads = append(g.threads, nt)
	killed := g.killed
	g.mu.Unlock()
	if killed {
		nt.kill()
	}
	return nt
}

// TGID returns the id of the task's thread group.
func (t *Task) TGID() int { return t.Group.TGID }

// String returns "comm[tid]".
func (t *Task) String() string { return t.Comm + "[" + strconv.Itoa(t.TID) + "]" }

// CPU returns the model CPU the task runs on, or -1.
func (t *Task) CPU() int {
	if t.Thread != nil {
		return t.Thread.CPU()
	}
	return int(t.cpu.Load())
}

// SetCPU sets the model CPU of a task that has no Thread (-1 for none).
func (t *Task) SetCPU(cpu int) { t.cpu.Store(int32(cpu)) }

// Block sleeps in wait, giving up the task's model CPU if it has one. Locks
// call it around their sleeps (locking.Blocker).
func (t *Task) Block(wait func()) {
	if t.Thread != nil {
		t.Thread.Block(wait)
		return
	}
	wait()
}

// Kill sends SIGKILL: it takes the task's whole thread group down, as a
// fatal signal does in the kernel. Every thread gets SIGKILL pending and its
// Fatal channel closed (exactly once, however often Kill is called).
// Mirrors kernel/signal.c:complete_signal() for a fatal signal.
func (t *Task) Kill() {
	g := t.Group
	g.mu.Lock()
	g.killed = true
	threads := append([]*Task(nil), g.threads...)
	g.mu.Unlock()
	for _, th := range threads {
		th.kill()
	}
}

func (t *Task) kill() {
	t.pending.Or(sigmask(SIGKILL))
	t.killed.Store(true)
	t.once.Do(func() { sched.Close(t.fatal) })
}

// Killed reports whether a fatal signal is pending (fatal_signal_pending).
func (t *Task) Killed() bool { return t.killed.Load() }

// Fatal returns a channel closed once the task has a fatal signal pending.
func (t *Task) Fatal() <-chan struct{} { return t.fatal }

// SendSignal makes sig pending. SIGKILL is Kill. Any other signal is
// directed at this thread (as tgkill and force_sig for a fault are); the
// model delivers no handlers, so it only stays pending.
func (t *Task) SendSignal(sig Signal) {
	if sig == SIGKILL {
		t.Kill()
		return
	}
	t.pending.Or(sigmask(sig))
}

// SignalPending reports whether sig is pending.
func (t *Task) SignalPending(sig Signal) bool {
	return t.pending.Load()&sigmask(sig) != 0
}

// PendingSignals returns the pending signals, lowest number first.
func (t *Task) PendingSignals() []Signal {
	var sigs []Signal
	p := t.pending.Load()
	for sig := Signal(1); sig <= 64; sig++ {
		if p&sigmask(sig) != 0 {
			sigs = append(sigs, sig)
		}
	}
	return sigs
}

// DequeueSignal removes and returns the next pending signal: the lowest
// synchronous one (SIGSEGV, SIGBUS, SIGTRAP, ...) if any, else the lowest.
// A dequeued SIGKILL leaves the task killed. Mirrors
// kernel/signal.c:next_signal() with nothing blocked.
func (t *Task) DequeueSignal() (Signal, bool) {
	for {
		p := t.pending.Load()
		if p == 0 {
			return 0, false
		}
		x := p
		if x&synchronousMask != 0 {
			x &= synchronousMask
		}
		bit := x & -x
		if t.pending.CompareAndSwap(p, p&^bit) {
			sig := Signal(1)
			for bit > 1 {
				bit >>= 1
				sig++
			}
			return sig, true
		}
	}
}

// RecordBlocked adds one wait of d on lock to the task's accounting
// (locking.BlockRecorder).
func (t *Task) RecordBlocked(lock string, d time.Duration) {
	t.blockedMu.Lock()
	defer t.blockedMu.Unlock()
	if t.blocked == nil {
		t.blocked = make(map[string]BlockStat)
	}
	st := t.blocked[lock]
	st.Count++
	st.Total += d
	st.Max = max(st.Max, d)
	t.blocked[lock] = st
}

// Blocked returns a snapshot of the task's blocked time, by lock name.
func (t *Task) Blocked() map[string]BlockStat {
	t.blockedMu.Lock()
	defer t.blockedMu.Unlock()
	m := make(map[string]BlockStat, len(t.blocked))
	for k, v := range t.blocked {
		m[k] = v
	}
	return m
}

// BlockedOn returns the task's total time blocked on lock.
func (t *Task) BlockedOn(lock string) time.Duration {
	t.blockedMu.Lock()
	defer t.blockedMu.Unlock()
	return t.blocked[lock].Total
}

// TakeBlocked returns the task's blocked time, by lock name, and resets it,
// in one step: an experiment calls it before and after one operation (one
// fork) to get that operation's blocked time. A task that was not blocked
// gets a nil map (it reads as empty), so that a loop of unblocked
// operations allocates none.
func (t *Task) TakeBlocked() map[string]BlockStat {
	t.blockedMu.Lock()
	defer t.blockedMu.Unlock()
	m := t.blocked
	t.blocked = nil
	return m
}
