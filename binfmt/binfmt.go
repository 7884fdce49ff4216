// Package binfmt is the one loader of the model's processes: it builds the
// address space a model runner's or a scenario's task runs its code in, as
// the kernel's execve of an ELF executable does.
//
//   - Exec mirrors fs/binfmt_elf.c:load_elf_binary(): a new mm
//     (fs/exec.c:bprm_mm_init(); here uprobes' NewTaskMM, so that the mm's
//     hooks are uprobes'), the executable mapped read-execute (elf_load()
//     of its PT_LOAD segment, whose mmap_region calls uprobe_mmap), and a
//     stack of private anonymous read-write memory
//     (fs/exec.c:setup_arg_pages()).
//   - StartThread mirrors arch/x86/kernel/process_64.c:start_thread(): the
//     registers a new thread starts from, its instruction pointer at the
//     entry and its stack pointer near the top of its stack.
//
// Model choices the kernel does not make:
//
//   - Fixed addresses: the text is at Text (where a non-PIE x86-64
//     executable is linked) and the stacks end at 0x7ff000000000; no
//     randomize_stack_top, no ELF_ET_DYN_BASE, no guard gap.
//   - No ELF parsing: a file is its code, mapped whole from offset 0 as
//     one r-xp VMA; there are no headers, data or bss segments, no
//     interpreter, vdso, auxv, argv or envp.
//   - Every thread's stack is mapped at load, 16 pages each, thread i's
//     i stacks below the top, so that the caller can add threads
//     (kernel.Task.NewThread) without mapping anything; in the kernel a
//     thread library maps the other threads' stacks, and the main stack
//     is VM_GROWSDOWN.
//   - A thread starts with every register zero but RIP and RSP, which is
//     64 bytes below its stack's top: nothing is there, where the
//     kernel's stack pointer is below argc, argv, envp and auxv.
//
// The package also holds what a runner builds around the loader: a model
// kernel (a machine and its uprobes), a program assembled at Text with
// the file that holds it, a uprobe on a program's label, a loop run to its
// halt, and Counter, a consumer whose handler counts its calls. Counter is
// here rather than in package uprobes because it is no part of
// kernel/events/uprobes.c, which uprobes mirrors: it stands for the
// handler a tracer attaches (the BPF program of the kernel's bench
// trig-uprobe counts its hits the same way), and it goes with Probe.
//
// It takes no lock of its own: Exec maps into an mm no other task can see
// yet.
package binfmt

import (
	"sync/atomic"
	"time"

	"mmlab/cpu"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/mm/pgtable"
	"mmlab/sched"
	"mmlab/uprobes"
)

// Text is the address every model executable is mapped at (file offset 0).
const Text = 0x400000

// The stacks: thread i's is stackPages pages ending i stacks below
// stackTop.
const (
	stackTop   = 0x7ff000000000
	stackPages = 16
)

// Exec returns the task of a new process of u named comm that has loaded f
// (load_elf_binary): f's whole file mapped read-execute at Text, and
// stacks for threads threads (setup_arg_pages) of private anonymous
// read-write memory. The caller adds the other threads
// (kernel.Task.NewThread).
func Exec(u *uprobes.Uprobes, comm string, f *mm.File, threads int) (*kernel.Task, error) {
	t, err := u.NewTaskMM(comm)
	if err != nil {
		return nil, err
	}
	if _, err := t.MM.Mmap(nil, Text, f.Inode.Size, mm.PROT_READ|mm.PROT_EXEC, mm.MAP_PRIVATE|mm.MAP_FIXED, f, 0); err != nil {
		return nil, err
	}
	stack := uint64(threads) * stackPages * pgtable.PageSize
	if _, err := t.MM.Mmap(nil, stackTop-stack, stack, mm.PROT_READ|mm.PROT_WRITE, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED, nil, 0); err != nil {
		return nil, err
	}
	return t, nil
}

// StartThread sets r's registers to start thread thread of its process at
// entry (start_thread): RIP = entry, RSP 64 bytes below the top of the
// thread's stack, every other register zero.
func StartThread(r *kernel.Runner, thread int, entry uint64) {
	r.Regs = cpu.Regs{RIP: entry}
	r.Regs.R[cpu.RSP] = stackTop - uint64(thread)*stackPages*pgtable.PageSize - 64
}

// Loop runs r's task from entry with RCX = n (the count of the model
// programs' loops) as thread thread (StartThread), until it stops.
func Loop(r *kernel.Runner, thread int, entry, n uint64) cpu.Stop {
	StartThread(r, thread, entry)
	r.Regs.R[cpu.RCX] = n
	return r.Run()
}

// A Kernel is one model kernel of a runner: a machine and its uprobes.
type Kernel struct {
	Machine *kernel.Machine
	Uprobes *uprobes.Uprobes
	host    sched.Host // the host its real-time CPUs run on, or nil
}

// ThreadCPUTime returns the CPU time of the calling model thread and
// whether there is one: its virtual CPU's on a simulated machine, else its
// OS thread's as the kernel's host reads it.
func (k *Kernel) ThreadCPUTime() (time.Duration, bool) {
	if d, ok := sched.ThreadCPUTime(); ok {
		return d, true
	}
	if k.host != nil {
		return k.host.ThreadCPUTime()
	}
	return 0, false
}

// NewKernel returns a model kernel of cpus CPUs on the machine d whose
// uprobes are of c, its CPUs pinned to host CPUs by h (sched.Config.Host;
// nil: not pinned). On error nothing of it runs.
func NewKernel(d machine.Description, cpus int, h sched.Host, c uprobes.Config) (*Kernel, error) {
	mach := kernel.NewMachineOn(d, sched.New(sched.Config{CPUs: cpus, Host: h}))
	u, err := uprobes.New(mach, c)
	if err != nil {
		mach.Stop()
		return nil, err
	}
	return &Kernel{Machine: mach, Uprobes: u, host: h}, nil
}

// NewSimKernel is NewKernel on a simulated machine of cpus virtual CPUs
// (kernel.NewSimMachine): its tasks run in the machine's one run, which
// Main starts.
func NewSimKernel(d machine.Description, cpus int, sim kernel.Sim, c uprobes.Config) (*Kernel, error) {
	mach, err := kernel.NewSimMachine(d, cpus, sim)
	if err != nil {
		return nil, err
	}
	u, err := uprobes.New(mach, c)
	if err != nil {
		mach.Stop()
		return nil, err
	}
	return &Kernel{Machine: mach, Uprobes: u}, nil
}

// NewKernelFor is NewSimKernel if sim is set, else NewKernel with its CPUs
// pinned by h.
func NewKernelFor(d machine.Description, cpus int, h sched.Host, sim *kernel.Sim, c uprobes.Config) (*Kernel, error) {
	if sim != nil {
		return NewSimKernel(d, cpus, *sim, c)
	}
	return NewKernel(d, cpus, h, c)
}

// Main runs body as the machine's main part (kernel.Machine.Main).
func (k *Kernel) Main(name string, body func() error) error { return k.Machine.Main(name, body) }

// InTurn runs step(k, i) for each step i < n of each kernel k of ks. In
// real time the kernels take turns step by step, so that the host's noise
// falls on all of them alike; on simulated machines, where nothing of the
// host comes between them, each kernel runs its steps in its one run
// (Main), one kernel after the other. It stops at the first error.
func InTurn(ks []*Kernel, n int, step func(k, i int) error) error {
	if len(ks) > 0 && ks[0].Machine.Sys.Sim() {
		for k := range ks {
			err := ks[k].Main("main", func() error {
				for i := range n {
					if err := step(k, i); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
	for i := range n {
		for k := range ks {
			if err := step(k, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// Stop ends the kernel's machine.
func (k *Kernel) Stop() { k.Machine.Stop() }

// A Program is code assembled at Text and the model file that holds it.
type Program struct {
	File *mm.Inode
	Code []byte // the file's bytes
	asm  *cpu.Asm
}

// NewProgram assembles prog at Text into a model file of ns named name.
func NewProgram(ns *mm.Namespace, name string, prog func(*cpu.Asm)) (*Program, error) {
	a := cpu.NewAsm(Text)
	prog(a)
	code, err := a.Assemble()
	if err != nil {
		return nil, err
	}
	in := mm.NewInode(ns, name, uint64(len(code)), func(off uint64) byte { return code[off] })
	return &Program{File: in, Code: code, asm: a}, nil
}

// Addr returns the address of the program's label; a label the program
// lacks is a runner's mistake, and panics.
func (p *Program) Addr(label string) uint64 {
	addr, ok := p.asm.Addr(label)
	if !ok {
		panic("binfmt: no label " + label + " in " + p.File.Name)
	}
	return addr
}

// Offset returns the offset of the program's label in its file, where a
// uprobe on it is registered.
func (p *Program) Offset(label string) uint64 { return p.Addr(label) - Text }

// Process returns the task of a new process of k that has loaded p from a
// file of its own (Exec) with stacks for threads threads.
func (k *Kernel) Process(comm string, p *Program, threads int) (*kernel.Task, error) {
	return Exec(k.Uprobes, comm, mm.Open(p.File), threads)
}

// Probe registers c on the program's label.
func (k *Kernel) Probe(p *Program, label string, c *uprobes.Consumer) (*uprobes.Uprobe, error) {
	return k.Uprobes.Register(nil, p.File, p.Offset(label), c)
}

// A Counter is a uprobe consumer whose handler counts its calls.
type Counter struct {
	uprobes.Consumer
	hits atomic.Uint64
}

// NewCounter returns a counter at 0.
func NewCounter() *Counter {
	c := &Counter{}
	c.Handler = func(*kernel.Runner) int { c.hits.Add(1); return 0 }
	return c
}

// Hits returns the handler's calls so far.
func (c *Counter) Hits() uint64 { return c.hits.Load() }
