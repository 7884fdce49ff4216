package experiment

import (
	"sync/atomic"

	"mmlab/cpu"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/mm/pgtable"
	"mmlab/uprobes"
)

// The model runners' address-space layout: a program mapped at ModelText;
// thread i of a process has a stack of modelStackPages pages ending i stacks
// below modelStackTop.
const (
	ModelText       = 0x400000
	modelStackPages = 16
	modelStackTop   = 0x7ff000000000
)

// A ModelKernel is one model kernel of a runner: a machine and its uprobes.
type ModelKernel struct {
	Machine *kernel.Machine
	Uprobes *uprobes.Uprobes
}

// NewModelKernel returns a model kernel of cpus CPUs on the machine d whose
// uprobes are of c. On error nothing of it runs.
func NewModelKernel(d machine.Description, cpus int, c uprobes.Config) (*ModelKernel, error) {
	mach := kernel.NewMachine(d, cpus)
	u, err := uprobes.New(mach, c)
	if err != nil {
		mach.Stop()
		return nil, err
	}
	return &ModelKernel{Machine: mach, Uprobes: u}, nil
}

// Stop ends the kernel's machine.
func (k *ModelKernel) Stop() { k.Machine.Stop() }

// A ModelProgram is code assembled at ModelText and the model file that
// holds it.
type ModelProgram struct {
	File *mm.Inode
	asm  *cpu.Asm
}

// NewModelProgram assembles prog at ModelText into a model file of ns named
// name.
func NewModelProgram(ns *mm.Namespace, name string, prog func(*cpu.Asm)) (*ModelProgram, error) {
	a := cpu.NewAsm(ModelText)
	prog(a)
	code, err := a.Assemble()
	if err != nil {
		return nil, err
	}
	in := mm.NewInode(ns, name, uint64(len(code)), func(off uint64) byte { return code[off] })
	return &ModelProgram{File: in, asm: a}, nil
}

// Addr returns the address of the program's label; a label the program
// lacks is a runner's mistake, and panics.
func (p *ModelProgram) Addr(label string) uint64 {
	addr, ok := p.asm.Addr(label)
	if !ok {
		panic("experiment: no label " + label + " in " + p.File.Name)
	}
	return addr
}

// Offset returns the offset of the program's label in its file, where a
// uprobe on it is registered.
func (p *ModelProgram) Offset(label string) uint64 { return p.Addr(label) - ModelText }

// Process returns the task of a new model process of k, which maps p
// read-execute at ModelText and has stacks for threads threads of
// anonymous read-write memory: the address space a model runner's process
// runs its code in (Loop). The caller adds the other threads
// (kernel.Task.NewThread).
func (k *ModelKernel) Process(comm string, p *ModelProgram, threads int) (*kernel.Task, error) {
	t, err := k.Uprobes.NewTaskMM(comm)
	if err != nil {
		return nil, err
	}
	if _, err := t.MM.Mmap(nil, ModelText, p.File.Size, mm.PROT_READ|mm.PROT_EXEC, mm.MAP_PRIVATE|mm.MAP_FIXED, mm.Open(p.File), 0); err != nil {
		return nil, err
	}
	stack := uint64(threads) * modelStackPages * pgtable.PageSize
	if _, err := t.MM.Mmap(nil, modelStackTop-stack, stack, mm.PROT_READ|mm.PROT_WRITE, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED, nil, 0); err != nil {
		return nil, err
	}
	return t, nil
}

// Probe registers c on the program's label.
func (k *ModelKernel) Probe(p *ModelProgram, label string, c *uprobes.Consumer) (*uprobes.Uprobe, error) {
	return k.Uprobes.Register(nil, p.File, p.Offset(label), c)
}

// Loop runs r's task from entry with RCX = n (the count of the model
// programs' loops) on the stack of thread thread, 64 bytes below its top,
// until it stops.
func Loop(r *kernel.Runner, thread int, entry, n uint64) cpu.Stop {
	r.Regs = cpu.Regs{RIP: entry}
	r.Regs.R[cpu.RSP] = modelStackTop - uint64(thread)*modelStackPages*pgtable.PageSize - 64
	r.Regs.R[cpu.RCX] = n
	return r.Run()
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
