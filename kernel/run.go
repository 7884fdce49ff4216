package kernel

import (
	"fmt"
	"sync/atomic"
	"time"

	"mmlab/cpu"
	"mmlab/errno"
	"mmlab/locking"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/sched"
)

// Machine is the model's hardware: model CPUs (package sched) on which
// tasks run their code through the x86 interpreter of package cpu, over
// their own page tables.
//
// # TLBs and text changes
//
// Each running task has a Runner, whose interpreter caches translations (a
// small TLB). A page-table change must reach those caches before the page it
// replaced is written or reused, as the kernel's TLB shootdown does:
// FlushTLB sends an IPI to every model CPU, and the handler, running on the
// CPU's current thread between two of its instructions, flushes the
// interpreter of the Runner that thread runs if it runs a task of that mm.
// A Runner that was not running at that moment (it slept inside the kernel:
// in a lock, in the uprobe hit path) flushes its own TLB when it wakes up,
// as a context switch reloads CR3.
//
// This is also what makes the model clean for the race detector: a
// breakpoint write (mm.UprobeWrite) clears the PTE, calls FlushTLB, and
// only then writes the page. Every read of the page by an interpreter either
// happened before the IPI was acknowledged (an IPI ends at the target's
// next instruction boundary, and its completion is observed by the writer),
// or before its thread gave up its CPU (sched's runqueue lock, which the IPI
// takes too); every later read must translate again, which needs the PTE,
// which the writer sets after the write (or a fault, which needs the mmap
// lock the writer holds or the VMA lock it write-locked).
type Machine struct {
	Sys *sched.System
	// Desc is the machine the model runs as, given at construction: its
	// features go to every address space made on it (NewTaskMM).
	Desc machine.Description
	// Traps handles int3 and single-step traps (package uprobes). Set
	// before any task runs.
	Traps Traps
	// NS numbers the machine's tasks, address spaces and inodes: every
	// machine its own, as every booted kernel.
	NS Namespace

	percpu        []machineCPU // indexed by model CPU id
	textPokeSyncs atomic.Int64
	// ipiGen counts onEachCPU's rounds of IPIs (the model's tlb_gen, for
	// TLB flushes and core serializations alike): on a simulated machine a
	// Runner that gave way flushes only if a round went out meanwhile or
	// another Runner ran on its CPU (resumed).
	ipiGen atomic.Uint64
	hooks  testHooks // set only by tests (export_test.go)
}

// machineCPU is one model CPU's state in the Machine.
type machineCPU struct {
	// curr is the Runner whose thread last started running model code on
	// this CPU, nil after its Run ended: the model's mm_cpumask. Stored
	// only by a thread of this CPU while it is current. It may be stale
	// (its task slept), so IPI handlers check that its thread is the
	// running one.
	curr atomic.Pointer[Runner]
	_    [56]byte
}

// Traps are the kernel's handlers for the traps of user code that uprobes
// claims: the DIE_INT3 and DIE_DEBUG notifier chains.
type Traps interface {
	// Int3 is called after an int3 executed (r.Regs.RIP after the 0xCC).
	// It returns 0 to resume the task, or the signal to deliver (SIGTRAP
	// for a breakpoint nobody claims, SIGILL for a bad uretprobe return).
	Int3(r *Runner) Signal
	// SingleStep is called after a single-stepped instruction; it returns
	// 0 to resume or the signal to deliver (SIGTRAP).
	SingleStep(r *Runner) Signal
	// Fault is called before a fault's signal is delivered (the
	// out-of-line step is aborted: arch_uprobe_abort_xol).
	Fault(r *Runner)
	// TaskExit is called on the task's thread when the Runner ends
	// (uprobe_free_utask at exit).
	TaskExit(r *Runner)
	// Syscall is offered every syscall the task executes (r.Regs as the
	// cpu.Hooks Syscall describes them). It returns handled false for a
	// system call it does not serve, which stops Run with
	// cpu.StopSyscall; otherwise 0 to resume or the signal to deliver.
	Syscall(r *Runner) (handled bool, sig Signal)
}

// NewMachine returns a machine described by d with ncpu model CPUs, not
// pinned to host CPUs (NewMachineOn a System with a sched.Config.Host is).
func NewMachine(d machine.Description, ncpu int) *Machine {
	return NewMachineOn(d, sched.NewSystem(ncpu))
}

// NewMachineOn returns a machine described by d on the CPUs of sys, in
// sys's mode (a deterministic System runs its tasks when sys.Run is called).
func NewMachineOn(d machine.Description, sys *sched.System) *Machine {
	return &Machine{Sys: sys, Desc: d, percpu: make([]machineCPU, sys.NumCPU())}
}

// NewTask returns a new single-threaded process of m named comm, without an
// address space (NewTask in m.NS).
func (m *Machine) NewTask(comm string) *Task { return NewTask(&m.NS, comm) }

// NewTaskMM returns a new single-threaded process of m named comm with an
// empty address space on m's features.
func (m *Machine) NewTaskMM(comm string) *Task { return NewTaskMM(&m.NS, comm, m.Desc.Features) }

// Stop asks every thread to finish and waits until all have.
func (m *Machine) Stop() { m.Sys.Stop() }

// Runner runs one task's code on its model CPU: it is the task's user
// context (its registers) plus the CPU's view of its memory. It implements
// cpu.Memory and cpu.Hooks for the interpreter, and locking.Waiter and
// locking.Blocker for the locks the task takes in the kernel, so that it
// knows when the task slept.
type Runner struct {
	Task *Task
	// Regs is the task's user register state (pt_regs). Only the task's
	// thread touches it.
	Regs cpu.Regs
	// Utask is uprobes' per-task state (current->utask); owned by Traps.
	Utask any

	m        *Machine
	mm       *mm.MM // the task's mm when the Runner started (mm_cpumask's key)
	interp   cpu.CPU
	switched bool   // slept since the interpreter's TLB was last checked
	ipiGen   uint64 // Machine.ipiGen at the last flush (simulated machines)
	ran      bool   // a Run has filled the interpreter's TLB
	polls    uint32 // instruction boundaries, to look for stop requests now and then
	done     chan struct{}
}

var (
	_ cpu.Memory     = (*Runner)(nil)
	_ cpu.Hooks      = (*Runner)(nil)
	_ locking.Waiter = (*Runner)(nil)
)

// Start runs body as task t on model CPU cpuID with priority prio: t gets a
// model thread of its own (t.Thread) and body a Runner for it. When body
// returns, Traps.TaskExit runs and the thread exits; Done is closed after.
func (m *Machine) Start(t *Task, cpuID, prio int, body func(r *Runner)) *Runner {
	r := &Runner{Task: t, m: m, mm: t.MM, done: make(chan struct{})}
	m.Sys.SpawnNamed(t.Comm, cpuID, prio, func(th *sched.Thread) {
		defer sched.Close(r.done)
		t.Thread = th
		body(r)
		if m.Traps != nil {
			m.Traps.TaskExit(r)
		}
	})
	return r
}

// Done returns a channel closed when the Runner's body has returned.
func (r *Runner) Done() <-chan struct{} { return r.done }

// Machine returns the machine the Runner runs on.
func (r *Runner) Machine() *Machine { return r.m }

// Thread returns the task's model thread.
func (r *Runner) Thread() *sched.Thread { return r.Task.Thread }

// Interp returns the task's CPU interpreter, for the trap handlers
// (Emulate, Load64, Store64). Use it only on the task's thread.
func (r *Runner) Interp() *cpu.CPU { return &r.interp }

// Run executes the task's code from r.Regs until hlt, a trap or fault the
// kernel does not resume from, a fatal signal, or System.Stop. A fault
// delivers its signal (SIGSEGV, SIGBUS, SIGILL) and an unclaimed int3 or
// single-step SIGTRAP, as pending signals of the task.
//
// On a simulated machine a Run after another of the same Runner keeps the
// TLB when no flush went round since (Machine.ipiGen, the model's tlb_gen)
// and the task did not sleep, as switch_mm_irqs_off() keeps it when the
// mm's tlb_gen has not moved; in real time each Run starts with a flush.
func (r *Runner) Run() cpu.Stop {
	pc := &r.m.percpu[r.Task.Thread.CPU()]
	warm := r.ran && r.m.Sys.Sim() && !r.switched && r.ipiGen == r.m.ipiGen.Load()
	r.ran = true
	pc.curr.Store(r)
	var s cpu.Stop
	if warm {
		s = r.interp.Resume(&r.Regs, r, r)
	} else {
		r.switched = false
		r.ipiGen = r.m.ipiGen.Load()
		s = r.interp.Run(&r.Regs, r, r)
	}
	pc.curr.Store(nil)
	return s
}

// pollStopEvery is how many instruction boundaries pass between two looks
// at the task's fatal signal and System.Stop: a kill takes effect within
// that many instructions, as one takes effect at the next interrupt or
// return to user space in the kernel.
const pollStopEvery = 64

// Poll is the instruction boundary: IPIs run and the task may be preempted
// here (cpu.Hooks).
func (r *Runner) Poll() bool {
	th := r.Task.Thread
	th.Point()
	if r.switched || th.Resumed() {
		r.gaveWay()
	}
	r.polls++
	return r.polls%pollStopEvery == 0 && (r.Task.Killed() || th.Stopping())
}

// Int3 runs Traps.Int3; SIGTRAP if nobody claims the trap (cpu.Hooks).
// A simulated machine charges the exception's entry and IRET here
// (arch/x86/kernel/traps.c:exc_int3() → do_int3_user() → the DIE_INT3
// notifier, uprobes' handle_swbp; then the IRET of the return to user).
func (r *Runner) Int3(*cpu.Regs) bool {
	sched.ChargeCost(sched.CostInt3, 1)
	sig := SIGTRAP
	if r.m.Traps != nil {
		sig = r.m.Traps.Int3(r)
	}
	return r.trapped(sig)
}

// trapped ends a trap handler: resume (sig 0) or deliver sig and stop.
func (r *Runner) trapped(sig Signal) bool {
	r.checkResumed()
	if sig != 0 {
		r.Task.SendSignal(sig)
		return false
	}
	return true
}

// SingleStep runs Traps.SingleStep; SIGTRAP if nobody claims it.
func (r *Runner) SingleStep(*cpu.Regs) bool {
	sig := SIGTRAP
	if r.m.Traps != nil {
		sig = r.m.Traps.SingleStep(r)
	}
	return r.trapped(sig)
}

// Syscall offers the system call to Traps (the uprobe syscalls); any other
// stops Run with cpu.StopSyscall: the model has no other system calls for
// user code, the Runner's caller sees the stop and may serve one
// (cpu.Hooks). A simulated machine charges the syscall's entry and exit
// here (arch/x86/entry/entry_64.S:entry_SYSCALL_64 → do_syscall_64, and
// the SYSRET or IRET back), the one place where user code the model runs
// enters the kernel by a syscall instruction. A model choice: the calls
// that model runners make straight into the kernel's Go code (mm's Mmap,
// Task.Fork) stand for syscalls too but are not charged an entry; their
// work (faults, populated pages, sleeps) is.
func (r *Runner) Syscall(*cpu.Regs) bool {
	sched.ChargeCost(sched.CostSyscall, 1)
	if r.m.Traps == nil {
		return false
	}
	handled, sig := r.m.Traps.Syscall(r)
	if !handled {
		return false
	}
	return r.trapped(sig)
}

// Fault delivers the fault's signal and stops the task (cpu.Hooks).
func (r *Runner) Fault(_ *cpu.Regs, f cpu.Fault) bool {
	if r.m.Traps != nil {
		r.m.Traps.Fault(r)
	}
	r.Task.SendSignal(f.Signal)
	return false
}

// checkResumed calls resumed if the task slept, or, in a deterministic run,
// gave way to other tasks at a preemption point (whose flush IPIs reach only
// the running task: sched.Thread.Resumed). On a simulated machine, where a
// thread gives way at every hand-off between virtual CPUs without leaving
// its own, giving way flushes only when a round of IPIs went out meanwhile
// or another Runner ran on the CPU: as switch_mm_irqs_off() compares the
// mm's tlb_gen with the CPU's and keeps the TLB of a CPU that ran nothing
// else. (The deterministic mode keeps flushing at every resume: its seeded
// schedules, and the explorer's pinned replays, count the lock waits of
// the refills.)
func (r *Runner) checkResumed() {
	if r.switched || r.Task.Thread.Resumed() {
		r.gaveWay()
	}
}

// gaveWay is checkResumed's slow path, after the task slept or gave way.
func (r *Runner) gaveWay() {
	if !r.switched && r.m.Sys.Sim() && r.ipiGen == r.m.ipiGen.Load() && r.m.percpu[r.Task.Thread.CPU()].curr.Load() == r {
		return
	}
	r.resumed()
}

// resumed runs after the task slept: its CPU may have run other tasks and
// missed flush IPIs, so the TLB is flushed, as switch_mm() does.
func (r *Runner) resumed() {
	r.switched = false
	r.ipiGen = r.m.ipiGen.Load()
	r.interp.Flush()
	r.m.percpu[r.Task.Thread.CPU()].curr.Store(r)
}

// Page translates addr for the interpreter (cpu.Memory): the VMA must allow
// the access as mm.AccessError says (write needs VM_WRITE, read and fetch
// any access bit; data accesses also the task's PKRU for the VMA's
// protection key), then the page is looked up, faulting it in (breaking
// copy-on-write for a write) if needed; a fetch from a present page needs
// VM_EXEC (mm.NXError). The model CPU caches a translation
// only after Page allowed it, and the model has no WRPKRU, so a cached
// translation stays allowed until the next flush.
func (r *Runner) Page(addr uint64, acc cpu.Access) (cpu.Page, error) {
	m := r.Task.MM
	if m == nil {
		return nil, errno.Fault(SIGSEGV, errno.SEGV_MAPERR)
	}
	defer r.checkResumed()
	var code mm.FaultCode
	switch acc {
	case cpu.Exec:
		code = mm.X86_PF_INSTR
	case cpu.Write:
		code = mm.X86_PF_WRITE
	}
	for {
		m.MmapReadLock(r)
		v := m.VMALookup(addr)
		if err := m.AccessError(v, code, r.Task.pkru); err != nil {
			m.MmapReadUnlock()
			return nil, err
		}
		pte, ok := m.PT.Lookup(addr)
		var nx error
		if ok && acc == cpu.Exec {
			nx = mm.NXError(v)
		}
		m.MmapReadUnlock()
		if nx != nil {
			return nil, nx
		}
		if ok && (acc != cpu.Write || pte.Write) {
			return pte.Page, nil
		}
		// arch/x86/mm/fault.c:exc_page_fault(): a simulated machine
		// charges the exception's entry and exit; the handler's work
		// (handle_mm_fault) is the model's own.
		sched.ChargeCost(sched.CostPageFault, 1)
		if err := m.Fault(r, addr, code); err != nil {
			return nil, err
		}
	}
}

// PKRU returns the task's PKRU register (mm.PKRUHolder).
func (r *Runner) PKRU() *mm.PKRU {
	if r == nil {
		return nil
	}
	return r.Task.PKRU()
}

// Fatal, CPU, Block and RecordBlocked make the Runner the task's
// locking.Waiter: Block notes that the task slept.

// Fatal returns the task's fatal-signal channel.
func (r *Runner) Fatal() <-chan struct{} { return r.Task.Fatal() }

// CPU returns the task's model CPU.
func (r *Runner) CPU() int { return r.Task.CPU() }

// Block sleeps in wait, giving up the CPU; the TLB is flushed on return.
func (r *Runner) Block(wait func()) {
	r.Task.Block(wait)
	r.switched = true
}

// RecordBlocked accounts a wait to the task.
func (r *Runner) RecordBlocked(lock string, d time.Duration) { r.Task.RecordBlocked(lock, d) }

// FlushTLB mirrors flush_tlb_mm(): every model CPU running a task of mm
// drops its cached translations before FlushTLB returns: an IPI to each CPU
// whose current Runner (mm_cpumask) is one of mm's; see Machine. A CPU
// skipped had no Runner of mm in Run, or another one took it over: either
// way the last Runner of mm there stored curr after its last read of mm's
// pages, which orders those reads before the caller's writes.
//
// w is the caller: a model task (a Blocker) sends the IPIs from inside
// Block, giving up its own CPU meanwhile, as the sched rules require; a
// plain goroutine sends them directly.
func (m *Machine) FlushTLB(mmp *mm.MM, w locking.Waiter) {
	m.onEachCPU(mmp, w, (*cpu.CPU).Flush)
}

// TextPokeSync mirrors arch/x86/kernel/alternative.c:
// smp_text_poke_sync_each_cpu(): an IPI to every model CPU (on_each_cpu,
// the caller's included) whose handler makes it serialize (do_sync_core),
// so that no CPU goes on executing instruction bytes it fetched before the
// caller's last text write. The model CPU serializes by dropping its
// decoded instructions (cpu.CPU.SyncCore). It is separate from the TLB
// shootdown of the write itself, and sent whether or not a CPU runs the mm.
// w is as for FlushTLB.
func (m *Machine) TextPokeSync(w locking.Waiter) {
	m.textPokeSyncs.Add(1)
	m.onEachCPU(nil, w, (*cpu.CPU).SyncCore)
}

// TextPokeSyncs returns how many TextPokeSync calls were made.
func (m *Machine) TextPokeSyncs() int64 { return m.textPokeSyncs.Load() }

// onEachCPU sends an IPI to every model CPU whose current Runner runs a
// task of mmp (every CPU if mmp is nil) and returns when each has run fn
// on the interpreter of that Runner (if it still runs there).
func (m *Machine) onEachCPU(mmp *mm.MM, w locking.Waiter, fn func(*cpu.CPU)) {
	m.ipiGen.Add(1)
	send := func() {
		self := -1
		if t := sched.Current(); t != nil {
			self = t.CPU()
		}
		for i := range m.percpu {
			if r := m.percpu[i].curr.Load(); mmp != nil && (r == nil || r.mm != mmp) {
				continue
			}
			if i != self {
				// smp_call_function_many_cond() waits for each
				// remote CPU's handler: a simulated machine charges
				// the sender an IPI per remote CPU (a model choice:
				// the handler runs at once on the sender and its CPU
				// pays nothing).
				sched.ChargeCost(sched.CostIPI, 1)
			}
			m.Sys.CPU(i).IPI(func(running *sched.Thread) {
				if running == nil {
					return
				}
				if r := m.percpu[i].curr.Load(); r != nil && r.Task.Thread == running && (mmp == nil || r.mm == mmp) {
					fn(&r.interp)
				}
			})
		}
	}
	if b, ok := w.(locking.Blocker); ok {
		b.Block(send)
		return
	}
	send()
}

// String returns "comm[tid]@cpuN".
func (r *Runner) String() string { return fmt.Sprintf("%v@cpu%d", r.Task, r.Task.CPU()) }
