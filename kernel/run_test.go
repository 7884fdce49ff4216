package kernel_test

import (
	"slices"
	"testing"
	"time"

	"mmlab/cpu"
	"mmlab/errno"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/mm"
)

// runProg maps code r-x at 0x400000, in a mapping two pages long whose
// second page is past the end of the file, and a stack, and runs it on a
// model CPU until it stops.
func runProg(t *testing.T, code []byte, kill bool) (*kernel.Task, cpu.Stop, cpu.Regs) {
	t.Helper()
	mach := kernel.NewMachine(machine.MustNamed("x86-64"), 1)
	t.Cleanup(mach.Stop)
	in := mm.NewInode(&mach.NS.MM, "/bin/prog", uint64(len(code)), func(off uint64) byte { return code[off] })
	task := mach.NewTaskMM("prog")
	if _, err := task.MM.Mmap(nil, 0x400000, 0x2000, mm.PROT_READ|mm.PROT_EXEC, mm.MAP_PRIVATE|mm.MAP_FIXED, mm.Open(in), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := task.MM.Mmap(nil, 0x7ff000000000-0x4000, 0x4000, mm.PROT_READ|mm.PROT_WRITE, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED, nil, 0); err != nil {
		t.Fatal(err)
	}
	if kill {
		task.Kill()
	}
	var s cpu.Stop
	var regs cpu.Regs
	r := mach.Start(task, 0, 0, func(r *kernel.Runner) {
		r.Regs.RIP, r.Regs.R[cpu.RSP] = 0x400000, 0x7ff000000000-64
		s = r.Run()
		regs = r.Regs
	})
	<-r.Done()
	return task, s, regs
}

// A task's code runs through its own page tables: calls push onto its
// stack, and it stops at hlt.
func TestRunnerRuns(t *testing.T) {
	t.Parallel()
	a := cpu.NewAsm(0x400000)
	a.MovImm32(cpu.RCX, 10).Label("l").Call("f").Dec32(cpu.RCX).Jnz("l").Hlt()
	a.Label("f").Inc32(cpu.RAX).Ret()
	code, _ := a.Assemble()
	task, s, regs := runProg(t, code, false)
	if s.Reason != cpu.StopHalt || regs.R[cpu.RAX] != 10 || len(task.PendingSignals()) != 0 {
		t.Fatalf("%v, rax %d, signals %v", s, regs.R[cpu.RAX], task.PendingSignals())
	}
}

// Jumping to the (non-executable) stack delivers SIGSEGV, to a page of the
// text mapping past the end of its file SIGBUS (the fault's signal from
// package mm reaches the task); an int3 nobody claims delivers SIGTRAP; a
// killed task stops.
func TestRunnerSignals(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		to   uint64
		want kernel.Signal
	}{
		{"exec on the stack", 0x7ff000000000 - 0x1000, kernel.SIGSEGV},
		{"exec past EOF", 0x401000, kernel.SIGBUS},
	} {
		a := cpu.NewAsm(0x400000)
		a.MovImm64(cpu.RAX, c.to).Push(cpu.RAX).Ret()
		code, _ := a.Assemble()
		task, s, _ := runProg(t, code, false)
		if s.Reason != cpu.StopFault || !slices.Equal(task.PendingSignals(), []kernel.Signal{c.want}) {
			t.Errorf("%s: %v, signals %v", c.name, s, task.PendingSignals())
		}
	}
	task, s, _ := runProg(t, []byte{0xcc, 0xf4}, false)
	if s.Reason != cpu.StopInt3 || !slices.Equal(task.PendingSignals(), []kernel.Signal{kernel.SIGTRAP}) {
		t.Errorf("int3: %v, signals %v", s, task.PendingSignals())
	}
	loop := cpu.NewAsm(0x400000)
	loop.Label("l").Jmp("l")
	code, _ := loop.Assemble()
	if _, s, _ = runProg(t, code, true); s.Reason != cpu.StopPoll {
		t.Errorf("killed task: %v", s)
	}
}

// Code in an execute-only mapping runs, and its data read of its own text
// faults with SEGV_PKUERR on a machine with protection keys; without them
// the read succeeds. The fault reaches the CPU with the fault's siginfo.
func TestRunnerExecOnly(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		machine string
		want    error
	}{
		{"x86-64-pku", errno.SigInfo{Signo: errno.SIGSEGV, Code: errno.SEGV_PKUERR, Pkey: 1}},
		{"x86-64", nil},
	} {
		d := machine.MustNamed(c.machine)
		a := cpu.NewAsm(0x400000)
		a.MovImm64(cpu.RSP, 0x400000).CmpMem(0, cpu.RAX).Hlt() // cmp %rax,(%rsp): a data read of the text
		code, _ := a.Assemble()
		mach := kernel.NewMachine(d, 1)
		in := mm.NewInode(&mach.NS.MM, "/bin/xo", uint64(len(code)), func(off uint64) byte { return code[off] })
		task := mach.NewTaskMM("xo")
		if _, err := task.MM.Mmap(task, 0x400000, 0x1000, mm.PROT_EXEC, mm.MAP_PRIVATE|mm.MAP_FIXED, mm.Open(in), 0); err != nil {
			t.Fatal(err)
		}
		var s cpu.Stop
		r := mach.Start(task, 0, 0, func(r *kernel.Runner) {
			r.Regs.RIP = 0x400000
			s = r.Run()
		})
		<-r.Done()
		mach.Stop()
		switch {
		case c.want == nil && s.Reason != cpu.StopHalt:
			t.Errorf("%s: %v, want hlt", c.machine, s)
		case c.want != nil && (s.Reason != cpu.StopFault || s.Fault.Err != c.want || s.Fault.Access != cpu.Read):
			t.Errorf("%s: %v (%v), want a read fault %v", c.machine, s, s.Fault.Err, c.want)
		}
	}
}

// A task's PKRU starts as init_pkru_value and is copied by clone and fork.
func TestPKRUCopied(t *testing.T) {
	t.Parallel()
	p := kernel.NewTaskMM(new(kernel.Namespace), "p", machine.MustNamed("x86-64-pku").Features)
	if *p.PKRU() != mm.InitPKRU {
		t.Fatalf("new task PKRU %#x", uint32(*p.PKRU()))
	}
	*p.PKRU() = 0
	th := p.NewThread()
	c, err := p.Fork()
	if err != nil {
		t.Fatal(err)
	}
	if *th.PKRU() != 0 || *c.PKRU() != 0 {
		t.Errorf("thread PKRU %#x, fork child PKRU %#x, want the parent's 0", uint32(*th.PKRU()), uint32(*c.PKRU()))
	}
}

// On a simulated machine a Runner's second Run keeps its TLB while no flush
// went round (its code runs without asking for a page again: no mmap_lock
// acquisition), and starts with an empty one after a FlushTLB; a Run on a
// real-time machine always starts empty. Not parallel: while a sim run is
// active, smp's words take any goroutine's access for the run's current
// thread (sched's detCur), so the other tests' machines must not run
// beside it.
func TestRunKeepsTLBWithoutFlush(t *testing.T) {
	a := cpu.NewAsm(0x400000)
	a.MovImm32(cpu.RCX, 10).Label("l").Call("f").Dec32(cpu.RCX).Jnz("l").Hlt()
	a.Label("f").Inc32(cpu.RAX).Ret()
	code, _ := a.Assemble()
	for _, sim := range []bool{true, false} {
		d := machine.MustNamed("x86-64")
		var mach *kernel.Machine
		if sim {
			var err error
			if mach, err = kernel.NewSimMachine(d, 1, kernel.Sim{Seed: 1, Until: time.Second}); err != nil {
				t.Fatal(err)
			}
		} else {
			mach = kernel.NewMachine(d, 1)
		}
		in := mm.NewInode(&mach.NS.MM, "/bin/prog", uint64(len(code)), func(off uint64) byte { return code[off] })
		task := mach.NewTaskMM("prog")
		if _, err := task.MM.Mmap(nil, 0x400000, 0x1000, mm.PROT_READ|mm.PROT_EXEC, mm.MAP_PRIVATE|mm.MAP_FIXED, mm.Open(in), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := task.MM.Mmap(nil, 0x7ff000000000-0x4000, 0x4000, mm.PROT_READ|mm.PROT_WRITE, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED|mm.MAP_POPULATE, nil, 0); err != nil {
			t.Fatal(err)
		}
		var locks []int64
		err := mach.Main("test", func() error {
			r := mach.Start(task, 0, 0, func(r *kernel.Runner) {
				for i := range 3 {
					if i == 2 {
						mach.FlushTLB(task.MM, r)
					}
					before := task.MM.MmapLock.Stats().Acquisitions
					r.Regs.RIP, r.Regs.R[cpu.RSP], r.Regs.R[cpu.RCX] = 0x400000, 0x7ff000000000-64, 0
					if s := r.Run(); s.Reason != cpu.StopHalt {
						t.Errorf("run %d: %v", i, s)
					}
					locks = append(locks, task.MM.MmapLock.Stats().Acquisitions-before)
				}
			})
			r.Wait()
			return nil
		})
		mach.Stop()
		if err != nil {
			t.Fatal(err)
		}
		refills := locks[0] > 0 && locks[2] > 0
		if kept := locks[1] == 0; !refills || kept != sim {
			t.Errorf("sim %v: mmap_lock acquisitions by runs 1-3 (the third after FlushTLB): %v", sim, locks)
		}
	}
}
