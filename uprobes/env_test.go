package uprobes

import (
	"testing"
	"time"

	"mmlab/cpu"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/mm/pgtable"
	"mmlab/sched"
)

// The test programs: a file whose bytes are the code, mapped r-xp at
// textAddr (file offset 0), and a private anonymous stack below stackTop.
const (
	textAddr   = 0x400000
	stackTop   = 0x7ff000000000
	stackPages = 4
)

// env is one model kernel: a machine, its uprobes, and a probed file.
type env struct {
	t     *testing.T
	mach  *kernel.Machine
	u     *Uprobes
	inode *mm.Inode
	file  *mm.File
	asm   *cpu.Asm
	code  []byte
}

// newEnv assembles prog at textAddr and returns a machine of ncpu CPUs
// with uprobes protected by flavor, in the before design of seed 000.
func newEnv(t testing.TB, ncpu int, flavor Flavor, prog func(a *cpu.Asm)) *env {
	return newEnvConfig(t, ncpu, Config{Flavor: flavor, Design: kernel.DesignBefore, HitPath: HitPathToday, Optimize: OptimizeCall}, prog)
}

// newEnvConfig is newEnv with uprobes in the design c chooses.
func newEnvConfig(t testing.TB, ncpu int, c Config, prog func(a *cpu.Asm)) *env {
	return newEnvOn(t, sched.NewSystem(ncpu), c, prog)
}

// newEnvOn is newEnvConfig on the CPUs of sys, in its mode.
func newEnvOn(t testing.TB, sys *sched.System, c Config, prog func(a *cpu.Asm)) *env {
	return newEnvMachine(t, kernel.NewMachineOn(machine.MustNamed("x86-64"), sys), c, prog)
}

// newSimEnv is newEnvConfig on a simulated machine of d with one CPU;
// its runs go inside e.mach.Main.
func newSimEnv(t testing.TB, d machine.Description, c Config, prog func(a *cpu.Asm)) *env {
	mach, err := kernel.NewSimMachine(d, 1, kernel.Sim{Seed: 1, Until: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return newEnvMachine(t, mach, c, prog)
}

// newEnvMachine is newEnvConfig on mach.
func newEnvMachine(t testing.TB, mach *kernel.Machine, c Config, prog func(a *cpu.Asm)) *env {
	a := cpu.NewAsm(textAddr)
	prog(a)
	code, err := a.Assemble()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mach.Stop)
	u, err := New(mach, c)
	if err != nil {
		t.Fatal(err)
	}
	in := mm.NewInode(&mach.NS.MM, "/usr/bin/probed", uint64(len(code)), func(off uint64) byte { return code[off] })
	e := &env{mach: mach, u: u, inode: in, file: mm.Open(in), asm: a, code: code}
	if tt, ok := t.(*testing.T); ok {
		e.t = tt
	}
	return e
}

// off returns the file offset of label.
func (e *env) off(label string) uint64 { return e.addr(label) - textAddr }

// addr returns the address of label.
func (e *env) addr(label string) uint64 {
	a, ok := e.asm.Addr(label)
	if !ok {
		panic("no label " + label)
	}
	return a
}

// newProc returns a process that maps the program and a stack.
func (e *env) newProc(tb testing.TB, name string) *kernel.Task {
	tb.Helper()
	t, err := e.u.NewTaskMM(name)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := t.MM.Mmap(nil, textAddr, uint64(len(e.code)), mm.PROT_READ|mm.PROT_EXEC,
		mm.MAP_PRIVATE|mm.MAP_FIXED, e.file, 0); err != nil {
		tb.Fatal(err)
	}
	if _, err := t.MM.Mmap(nil, stackTop-stackPages*pgtable.PageSize, stackPages*pgtable.PageSize,
		mm.PROT_READ|mm.PROT_WRITE, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED, nil, 0); err != nil {
		tb.Fatal(err)
	}
	return t
}

// result is how one run of a task ended.
type result struct {
	stop  cpu.Stop
	regs  cpu.Regs
	sigs  []kernel.Signal
	stack []byte // the stack page below stackTop
}

// run runs task t on CPU cpuID from label entry with regs set by setup,
// until it stops; then body (if set) runs on the task's thread.
func (e *env) run(tb testing.TB, t *kernel.Task, cpuID int, entry string, setup func(r *cpu.Regs)) result {
	tb.Helper()
	var res result
	r := e.mach.Start(t, cpuID, 0, func(r *kernel.Runner) {
		r.Regs.RIP = e.addr(entry)
		r.Regs.R[cpu.RSP] = stackTop - 64
		if setup != nil {
			setup(&r.Regs)
		}
		res.stop = r.Run()
		res.regs = r.Regs
	})
	sched.Wait(nil, "task exit", r.Done(), nil)
	res.sigs = t.PendingSignals()
	res.stack = readBytes(tb, t.MM, stackTop-pgtable.PageSize, pgtable.PageSize)
	return res
}

// readBytes reads n bytes at addr of m as the task would see them, under
// the mmap read lock (so no breakpoint write runs meanwhile).
func readBytes(tb testing.TB, m *mm.MM, addr uint64, n int) []byte {
	tb.Helper()
	out := make([]byte, n)
	for i := range out {
		b, err := m.LoadByte(nil, addr+uint64(i))
		if err != nil {
			tb.Fatalf("read %#x: %v", addr+uint64(i), err)
		}
		out[i] = b
	}
	return out
}

// byteAt is the byte the mm maps at addr now.
func byteAt(tb testing.TB, m *mm.MM, addr uint64) byte { return readBytes(tb, m, addr, 1)[0] }

// counter is a consumer that counts its calls. Only the hitting thread
// writes; tests read after the run (Done orders them).
type counter struct {
	hits, rets int
	fns        []uint64 // ret_handler's fn
	retIPs     []uint64 // ip at each ret_handler
	c          Consumer
}

func newCounter(handler, ret bool, filter func(*mm.MM) bool) *counter {
	k := &counter{}
	if handler {
		k.c.Handler = func(*kernel.Runner) int { k.hits++; return 0 }
	}
	if ret {
		k.c.RetHandler = func(fn uint64, r *kernel.Runner) {
			k.rets++
			k.fns = append(k.fns, fn)
			k.retIPs = append(k.retIPs, r.Regs.RIP)
		}
	}
	k.c.Filter = filter
	return k
}
