package uprobes

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"mmlab/cpu"
	"mmlab/design"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/rcu"
	"mmlab/sched"
)

// kernels are the hit paths the behaviour tests run on: today's and
// seed 004's era, each under both flavours.
// flavors are the hit path's protections; kernels every hit path under
// each.
var flavors = Flavors.Values()

var kernels = []Config{
	{Flavor: SRCU, Design: kernel.DesignBefore, HitPath: HitPathToday, Optimize: OptimizeCall}, {Flavor: TasksTrace, Design: kernel.DesignBefore, HitPath: HitPathToday, Optimize: OptimizeCall},
	{Flavor: SRCU, Design: kernel.DesignBefore, Optimize: OptimizeCall, HitPath: HitPathV612}, {Flavor: TasksTrace, Design: kernel.DesignBefore, Optimize: OptimizeCall, HitPath: HitPathV612},
}

func kernelName(c Config) string { return c.Flavor.String() + "/" + c.HitPath.String() }

// forKernels runs test as a subtest in each configuration of kernels.
func forKernels(t *testing.T, test func(t *testing.T, kc Config)) {
	for _, kc := range kernels {
		t.Run(kernelName(kc), func(t *testing.T) { test(t, kc) })
	}
}

// loopProg: main calls f RCX times; f = "nop; inc eax; ret", so RAX counts
// the calls that really ran. g = "push rbp; mov rbp,rsp; pop rbp; ret" for
// probes that must be single-stepped (pop, ret).
func loopProg(a *cpu.Asm) {
	a.Label("main").Label("loop").Call("f").Dec32(cpu.RCX).Jnz("loop").Hlt()
	a.Label("main_g").Label("loop_g").Call("g").Dec32(cpu.RCX).Jnz("loop_g").Hlt()
	a.Label("trap").Int3().Hlt()
	a.Label("f").Nop().Inc32(cpu.RAX).Label("f_ret").Ret()
	a.Label("g").Push(cpu.RBP).Mov(cpu.RBP, cpu.RSP).Label("g_pop").Pop(cpu.RBP).Label("g_ret").Ret()
}

func calls(n uint64) func(r *cpu.Regs) {
	return func(r *cpu.Regs) { r.R[cpu.RCX] = n; r.R[cpu.RBP] = 0xb0b0 }
}

func mustRegister(t testing.TB, e *env, label string, c *Consumer) *Uprobe {
	t.Helper()
	up, err := e.u.Register(nil, e.inode, e.off(label), c)
	if err != nil {
		t.Fatalf("register %s: %v", label, err)
	}
	return up
}

func wantHalt(t testing.TB, res result) {
	t.Helper()
	if res.stop.Reason != cpu.StopHalt || len(res.sigs) != 0 {
		t.Fatalf("stopped with %v, signals %v (regs %v)", res.stop, res.sigs, &res.regs)
	}
}

// A hit runs every consumer's handler exactly once; the breakpoint is a
// 0xCC in the process's own copy of the page, the page cache keeps the nop.
func TestHitRunsEveryConsumerOnce(t *testing.T) {
	t.Parallel()
	forKernels(t, func(t *testing.T, kc Config) {
		e := newEnvConfig(t, 1, kc, loopProg)
		p := e.newProc(t, "p")
		k1, k2 := newCounter(true, false, nil), newCounter(true, false, nil)
		mustRegister(t, e, "f", &k1.c)
		mustRegister(t, e, "f", &k2.c)
		if e.u.Len() != 1 {
			t.Fatalf("%d uprobes for one (inode, offset)", e.u.Len())
		}
		res := e.run(t, p, 0, "main", calls(100))
		wantHalt(t, res)
		if k1.hits != 100 || k2.hits != 100 || res.regs.R[cpu.RAX] != 100 {
			t.Errorf("hits %d and %d, calls run %d; want 100 each", k1.hits, k2.hits, res.regs.R[cpu.RAX])
		}
		if b := byteAt(t, p.MM, e.addr("f")); b != swbp {
			t.Errorf("mm maps %#x at the probe, want int3", b)
		}
		if b := e.inode.Cache.Get(0).ByteAt(int(e.off("f"))); b != 0x90 {
			t.Errorf("page cache has %#x at the probe, want the nop", b)
		}
		if !p.MM.FlagTest(mm.MMF_HAS_UPROBES) {
			t.Error("MMF_HAS_UPROBES not set")
		}
	})
}

// A filter decides which mms get the breakpoint, and so which hit.
func TestFilter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1, TasksTrace, loopProg)
	a, b := e.newProc(t, "a"), e.newProc(t, "b")
	k := newCounter(true, false, func(m *mm.MM) bool { return m == a.MM })
	mustRegister(t, e, "f", &k.c)
	if byteAt(t, a.MM, e.addr("f")) != swbp || byteAt(t, b.MM, e.addr("f")) != 0x90 {
		t.Fatal("breakpoint not only in the filtered-in mm")
	}
	wantHalt(t, e.run(t, a, 0, "main", calls(10)))
	res := e.run(t, b, 0, "main", calls(7))
	wantHalt(t, res)
	if k.hits != 10 || res.regs.R[cpu.RAX] != 7 {
		t.Errorf("hits %d, want 10 (a only); b ran %d calls", k.hits, res.regs.R[cpu.RAX])
	}
}

// Unregistering removes the breakpoint from every mm, restoring the
// original byte; the anonymous copy, now equal to the file's page, is
// zapped, so the mm maps the page cache page again; the uprobe is freed
// after the grace periods.
func TestUnregisterRestores(t *testing.T) {
	t.Parallel()
	forKernels(t, func(t *testing.T, kc Config) {
		e := newEnvConfig(t, 1, kc, loopProg)
		a, b := e.newProc(t, "a"), e.newProc(t, "b")
		k := newCounter(true, false, nil)
		up := mustRegister(t, e, "f", &k.c)
		wantHalt(t, e.run(t, a, 0, "main", calls(5)))
		wantHalt(t, e.run(t, b, 0, "main", calls(5)))
		for _, p := range []*kernel.Task{a, b} {
			if pte, ok := p.MM.PT.Lookup(e.addr("f")); !ok || !pte.Page.IsAnon() || byteAt(t, p.MM, e.addr("f")) != swbp {
				t.Fatalf("%v: no anonymous copy with the breakpoint", p)
			}
		}
		if err := e.u.UnregisterNosync(nil, up, &k.c); err != nil {
			t.Fatal(err)
		}
		e.u.UnregisterSync(nil)
		for _, p := range []*kernel.Task{a, b} {
			if pte, ok := p.MM.PT.Lookup(e.addr("f")); ok && pte.Page.IsAnon() {
				t.Errorf("%v: the anonymous copy was not zapped", p)
			}
			if got := readBytes(t, p.MM, textAddr, len(e.code)); !slices.Equal(got, e.code) {
				t.Errorf("%v: text after unregister differs from the file", p)
			}
		}
		if e.u.Len() != 0 || e.u.Lookup(e.inode, e.off("f")) != nil {
			t.Error("uprobe still in the tree")
		}
		e.u.uretSRCU.Barrier()
		e.u.flavor.Barrier()
		if !up.Freed() {
			t.Error("uprobe not freed after both grace periods")
		}
		res := e.run(t, a, 0, "main", calls(5))
		wantHalt(t, res)
		if k.hits != 10 || res.regs.R[cpu.RAX] != 5 {
			t.Errorf("hits %d after unregister, want 10", k.hits)
		}
	})
}

// A process that maps the file after registration gets the breakpoint
// (uprobe_mmap).
func TestNewMappingGetsBreakpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1, SRCU, loopProg)
	k := newCounter(true, false, nil)
	mustRegister(t, e, "g_ret", &k.c)
	p := e.newProc(t, "late")
	if byteAt(t, p.MM, e.addr("g_ret")) != swbp || !p.MM.FlagTest(mm.MMF_HAS_UPROBES) {
		t.Fatal("new mapping has no breakpoint")
	}
	wantHalt(t, e.run(t, p, 0, "main_g", calls(3)))
	if k.hits != 3 {
		t.Errorf("hits %d, want 3", k.hits)
	}
}

// A forked child keeps the breakpoint: it comes with the anonymous text
// page that fork copies; unregistering then restores both.
func TestForkKeepsBreakpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1, TasksTrace, loopProg)
	p := e.newProc(t, "parent")
	k := newCounter(true, false, nil)
	up := mustRegister(t, e, "f", &k.c)
	var child *kernel.Task
	var ferr error
	r := e.mach.Start(p, 0, 0, func(r *kernel.Runner) { child, ferr = r.Task.Fork() })
	<-r.Done()
	if ferr != nil {
		t.Fatal(ferr)
	}
	if byteAt(t, child.MM, e.addr("f")) != swbp || !child.MM.FlagTest(mm.MMF_HAS_UPROBES) {
		t.Fatal("child lost the breakpoint")
	}
	wantHalt(t, e.run(t, child, 0, "main", calls(4)))
	if k.hits != 4 {
		t.Errorf("child hits %d, want 4", k.hits)
	}
	if err := e.u.UnregisterNosync(nil, up, &k.c); err != nil {
		t.Fatal(err)
	}
	for _, q := range []*kernel.Task{p, child} {
		if byteAt(t, q.MM, e.addr("f")) != 0x90 {
			t.Errorf("%v keeps the breakpoint after unregister", q)
		}
	}
}

// Probes on pop and ret are single-stepped out of line in the [uprobes]
// page (--xp) and leave registers and stack exactly as unprobed runs do.
func TestSingleStepLikeUnprobed(t *testing.T) {
	t.Parallel()
	forKernels(t, func(t *testing.T, kc Config) {
		e := newEnvConfig(t, 1, kc, loopProg)
		plain, probed := e.newProc(t, "plain"), e.newProc(t, "probed")
		k := newCounter(true, false, func(m *mm.MM) bool { return m == probed.MM })
		for _, l := range []string{"g_pop", "g_ret"} {
			up := mustRegister(t, e, l, &k.c)
			if up.Insn().Class != cpu.XOL {
				t.Fatalf("%s: class %v, want xol", l, up.Insn().Class)
			}
		}
		want := e.run(t, plain, 0, "main_g", calls(20))
		got := e.run(t, probed, 0, "main_g", calls(20))
		wantHalt(t, got)
		if got.regs != want.regs || !slices.Equal(got.stack, want.stack) {
			t.Errorf("probed run\n %v\nunprobed\n %v (stacks equal: %v)", &got.regs, &want.regs, slices.Equal(got.stack, want.stack))
		}
		if k.hits != 40 {
			t.Errorf("hits %d, want 40", k.hits)
		}
		xol, ok := e.u.XolArea(probed.MM)
		v := probed.MM.VMALookup(xol)
		if !ok || xol != 0x7fffffffe000 || v == nil || v.Name != "[uprobes]" || v.Flags.String() != "--xp" {
			t.Errorf("XOL area %#x %v: %+v", xol, ok, v)
		}
		if _, ok := e.u.XolArea(plain.MM); ok {
			t.Error("unprobed process got an XOL area")
		}
	})
}

// retProg: nested calls, recursion and a tail call, each function
// starting with a nop.
func retProg(a *cpu.Asm) {
	a.Label("nest").Call("f1").Label("nest_ret").Hlt()
	a.Label("f1").Nop().Call("g1").Label("f1_ret").Ret()
	a.Label("g1").Nop().Ret()
	a.Label("rec").Call("r1").Label("rec_ret").Hlt()
	a.Label("r1").Nop().Dec32(cpu.RCX).Jz("r1_out").Call("r1").Label("r1_ret").Label("r1_out").Ret()
	a.Label("tail").Call("t1").Label("tail_ret").Hlt()
	a.Label("t1").Nop().Jmp("t2")
	a.Label("t2").Nop().Ret()
}

// A uretprobe's ret_handler gets the function's entry and runs with ip at
// the right return address, innermost first, for nested, recursive and
// chained (tail) calls; the task's registers end as without probes.
func TestUretprobeNestedRecursive(t *testing.T) {
	t.Parallel()
	forKernels(t, func(t *testing.T, kc Config) {
		e := newEnvConfig(t, 1, kc, retProg)
		names := map[uint64]string{}
		var log []string
		for _, l := range []string{"f1", "g1", "r1", "t1", "t2", "nest_ret", "f1_ret", "rec_ret", "r1_ret", "tail_ret"} {
			names[e.addr(l)] = l
		}
		plain := e.newProc(t, "plain")
		p := e.newProc(t, "p")
		for _, l := range []string{"f1", "g1", "r1", "t1", "t2"} {
			mustRegister(t, e, l, &Consumer{RetHandler: func(fn uint64, r *kernel.Runner) {
				log = append(log, names[fn]+"@"+names[r.Regs.RIP])
			}, Filter: func(m *mm.MM) bool { return m == p.MM }})
		}
		for _, tc := range []struct {
			entry string
			rcx   uint64
			want  []string
		}{
			{"nest", 0, []string{"g1@f1_ret", "f1@nest_ret"}},
			{"rec", 3, []string{"r1@r1_ret", "r1@r1_ret", "r1@rec_ret"}},
			{"tail", 0, []string{"t2@tail_ret", "t1@tail_ret"}},
		} {
			log = nil
			setup := func(r *cpu.Regs) { r.R[cpu.RCX] = tc.rcx }
			want := e.run(t, plain, 0, tc.entry, setup)
			got := e.run(t, p, 0, tc.entry, setup)
			wantHalt(t, got)
			if !slices.Equal(log, tc.want) {
				t.Errorf("%s: ret handlers %v, want %v", tc.entry, log, tc.want)
			}
			if got.regs != want.regs {
				t.Errorf("%s: regs %v, unprobed %v", tc.entry, &got.regs, &want.regs)
			}
		}
	})
}

// A grace period (UnregisterSync) waits for a reader inside a handler.
func TestGracePeriodWaitsForHandler(t *testing.T) {
	t.Parallel()
	forKernels(t, func(t *testing.T, kc Config) {
		e := newEnvConfig(t, 1, kc, loopProg)
		p := e.newProc(t, "p")
		entered, release, waiting := make(chan struct{}), make(chan struct{}), make(chan struct{})
		var once, released sync.Once
		defer released.Do(func() { close(release) }) // a failing test must not leave the reader stuck
		c := &Consumer{Handler: func(r *kernel.Runner) int {
			once.Do(func() { close(entered); r.Block(func() { <-release }) })
			return 0
		}}
		switch f := e.u.flavor.(type) {
		case *rcu.SRCU:
			f.SetWaitHook(func() { close(waiting) })
		case *rcu.TasksTrace:
			f.SetWaitHook(func() { close(waiting) })
		}
		up := mustRegister(t, e, "f", c)
		r := e.mach.Start(p, 0, 0, func(r *kernel.Runner) {
			r.Regs.RIP, r.Regs.R[cpu.RSP], r.Regs.R[cpu.RCX] = e.addr("main"), stackTop-64, 1
			r.Run()
		})
		<-entered
		if err := e.u.UnregisterNosync(nil, up, c); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { e.u.UnregisterSync(nil); close(done) }()
		select {
		case <-done:
			t.Fatal("UnregisterSync returned while a handler was running")
		case <-waiting:
		}
		select {
		case <-done:
			t.Fatal("UnregisterSync returned while a handler was running")
		default:
		}
		released.Do(func() { close(release) })
		<-done
		<-r.Done()
	})
}

// An int3 with no uprobe behind it delivers SIGTRAP: the program's own, and
// one a uprobe left behind when it vanished from the registry.
func TestStrayBreakpointSIGTRAP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1, TasksTrace, loopProg)
	p := e.newProc(t, "p")
	res := e.run(t, p, 0, "trap", nil)
	if res.stop.Reason != cpu.StopInt3 || !slices.Equal(res.sigs, []kernel.Signal{kernel.SIGTRAP}) {
		t.Fatalf("own int3 without uprobes: %v %v", res.stop, res.sigs)
	}
	p.DequeueSignal()
	k := newCounter(true, false, nil)
	mustRegister(t, e, "f", &k.c) // MMF_HAS_UPROBES: the hit path looks
	res = e.run(t, p, 0, "trap", nil)
	if res.stop.Reason != cpu.StopInt3 || !slices.Equal(res.sigs, []kernel.Signal{kernel.SIGTRAP}) {
		t.Fatalf("own int3 in a probed mm: %v %v", res.stop, res.sigs)
	}
	p.DequeueSignal()
	e.u.treeLock.Lock() // the uprobe vanishes, its breakpoint stays
	e.u.tree.Store(new([]*Uprobe))
	e.u.treeLock.Unlock()
	res = e.run(t, p, 0, "main", calls(1))
	if res.stop.Reason != cpu.StopInt3 || !slices.Equal(res.sigs, []kernel.Signal{kernel.SIGTRAP}) || res.regs.RIP != e.addr("f")+1 {
		t.Fatalf("left-behind breakpoint: %v %v at %#x", res.stop, res.sigs, res.regs.RIP)
	}
	if k.hits != 0 {
		t.Errorf("%d handler calls for a vanished uprobe", k.hits)
	}
}

// Registration errors: an int3 cannot be probed; offsets past the file are
// refused; a failed registration leaves nothing behind.
func TestRegisterErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1, SRCU, loopProg)
	p := e.newProc(t, "p")
	c := &Consumer{Handler: func(*kernel.Runner) int { return 0 }}
	if _, err := e.u.Register(nil, e.inode, e.off("trap"), c); err == nil || err.Error() != "ENOTSUPP" {
		t.Errorf("probe on int3: %v, want ENOTSUPP", err)
	}
	if _, err := e.u.Register(nil, e.inode, uint64(len(e.code))+1, c); err == nil {
		t.Error("probe past EOF accepted")
	}
	if _, err := e.u.Register(nil, e.inode, 0, &Consumer{}); err == nil {
		t.Error("consumer without handlers accepted")
	}
	if e.u.Len() != 0 || byteAt(t, p.MM, e.addr("trap")) != 0xcc || p.MM.FlagTest(mm.MMF_HAS_UPROBES) {
		t.Error("failed registration left state behind")
	}
}

// loopOnCPUs starts a process on each of e's two CPUs, named prefix0 and
// prefix1, whose task runs batch(r, n) for n = 0, 1, ... until stop is set
// or batch returns false.
func loopOnCPUs(t *testing.T, e *env, prefix string, stop *atomic.Bool, batch func(r *kernel.Runner, n int) bool) ([]*kernel.Task, []*kernel.Runner) {
	var procs []*kernel.Task
	var runners []*kernel.Runner
	for i := range 2 {
		p := e.newProc(t, fmt.Sprint(prefix, i))
		procs = append(procs, p)
		runners = append(runners, e.mach.Start(p, i, 0, func(r *kernel.Runner) {
			for n := 0; !stop.Load(); n++ {
				if !batch(r, n) {
					return
				}
			}
		}))
	}
	return procs, runners
}

// Stress for the race detector: tasks on two CPUs call probed functions in
// a loop while probes are registered and unregistered; after each completed
// register or unregister, every mm that maps the file agrees with the
// registry, and every batch of calls ran exactly.
func TestStressRegisterWhileHitting(t *testing.T) {
	t.Parallel()
	forKernels(t, func(t *testing.T, kc Config) {
		e := newEnvConfig(t, 2, kc, loopProg)
		var stop atomic.Bool
		var hits atomic.Int64
		errs := make(chan error, 2)
		procs, runners := loopOnCPUs(t, e, "p", &stop, func(r *kernel.Runner, n int) bool {
			entry := "main"
			if n%2 == 1 {
				entry = "main_g"
			}
			r.Regs = cpu.Regs{RIP: e.addr(entry)}
			r.Regs.R[cpu.RSP], r.Regs.R[cpu.RCX], r.Regs.R[cpu.RBP] = stackTop-64, 50, 7
			s := r.Run()
			ok := s.Reason == cpu.StopHalt && r.Regs.R[cpu.RSP] == stackTop-64 && r.Regs.R[cpu.RBP] == 7
			if entry == "main" && r.Regs.R[cpu.RAX] != 50 {
				ok = false
			}
			if !ok {
				errs <- fmt.Errorf("%v batch %d (%s): %v, regs %v, signals %v", r.Task, n, entry, s, &r.Regs, r.Task.PendingSignals())
			}
			return ok
		})
		labels := []string{"f", "f_ret", "g_pop", "g_ret"}
		registered := map[string]bool{}
		check := func(when string) {
			t.Helper()
			ps := append(procs, e.newProc(t, "late"))
			for _, p := range ps {
				for _, l := range labels {
					p.MM.MmapReadLock(nil)
					b, _ := p.MM.PeekByte(e.addr(l))
					p.MM.MmapReadUnlock()
					if (b == swbp) != registered[l] {
						t.Fatalf("%s: %v maps %#x at %s, registered %v", when, p, b, l, registered[l])
					}
				}
			}
			ps[len(ps)-1].ExitMM()
		}
		type reg struct {
			up *Uprobe
			c  *Consumer
		}
		regs := map[string]reg{}
		for round := range 12 {
			for _, l := range labels {
				c := &Consumer{Handler: func(*kernel.Runner) int { hits.Add(1); return 0 }}
				regs[l] = reg{mustRegister(t, e, l, c), c}
				registered[l] = true
				check(fmt.Sprintf("round %d register %s", round, l))
			}
			for _, l := range labels {
				if err := e.u.UnregisterNosync(nil, regs[l].up, regs[l].c); err != nil {
					t.Fatal(err)
				}
				registered[l] = false
				check(fmt.Sprintf("round %d unregister %s", round, l))
			}
			e.u.UnregisterSync(nil)
		}
		stopRunners(t, &stop, runners, errs)
		t.Logf("%d hits", hits.Load())
	})
}

// Fork takes dup_mmap_sem for read: it waits while a registration holds it
// for write, and completes once it is released.
func TestForkWaitsForDupMmapSem(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1, TasksTrace, loopProg)
	p := e.newProc(t, "parent")
	e.u.DupMmapSem.DownWrite(nil) // as registerForEachVMA holds it
	forked := make(chan error, 1)
	r := e.mach.Start(p, 0, 0, func(r *kernel.Runner) {
		_, err := r.Task.Fork()
		forked <- err
	})
	for e.u.DupMmapSem.Waiters() == 0 {
		runtime.Gosched() // until the fork is queued on dup_mmap_sem
	}
	select {
	case err := <-forked:
		t.Fatalf("fork completed (%v) while dup_mmap_sem was held for write", err)
	default:
	}
	e.u.DupMmapSem.UpWrite()
	if err := <-forked; err != nil {
		t.Fatal(err)
	}
	<-r.Done()
	if d := p.BlockedOn("dup_mmap_sem"); d <= 0 {
		t.Errorf("fork's time blocked on dup_mmap_sem not accounted: %v", d)
	}
}

// Removing the last breakpoint leaves MMF_HAS_UPROBES set with
// MMF_RECALC_UPROBES; the next miss of the hit path (here the program's own
// int3) recomputes it and clears it, and that int3 still delivers SIGTRAP.
func TestRecalcHasUprobes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1, SRCU, loopProg)
	p := e.newProc(t, "p")
	k := newCounter(true, false, nil)
	up := mustRegister(t, e, "f", &k.c)
	if err := e.u.UnregisterNosync(nil, up, &k.c); err != nil {
		t.Fatal(err)
	}
	if !p.MM.FlagTest(mm.MMF_HAS_UPROBES) || !p.MM.FlagTest(mm.MMF_RECALC_UPROBES) {
		t.Fatal("unregister did not leave HAS and RECALC set")
	}
	res := e.run(t, p, 0, "trap", nil)
	if !slices.Equal(res.sigs, []kernel.Signal{kernel.SIGTRAP}) {
		t.Errorf("signals %v", res.sigs)
	}
	if p.MM.FlagTest(mm.MMF_HAS_UPROBES) || p.MM.FlagTest(mm.MMF_RECALC_UPROBES) {
		t.Error("the hit path's miss did not recompute MMF_HAS_UPROBES")
	}
}

// A model task can be the tracer: it registers and unregisters from its
// model CPU while tasks on that CPU and the other one hit the probe; its
// TLB shootdowns and grace periods wait inside Block, giving the CPU to
// the task it must interrupt.
func TestTracerIsModelTask(t *testing.T) {
	t.Parallel()
	forKernels(t, func(t *testing.T, kc Config) {
		e := newEnvConfig(t, 2, kc, loopProg)
		var stop atomic.Bool
		var hits atomic.Int64
		_, hitters := loopOnCPUs(t, e, "hitter", &stop, func(r *kernel.Runner, _ int) bool {
			r.Regs = cpu.Regs{RIP: e.addr("main")}
			r.Regs.R[cpu.RSP], r.Regs.R[cpu.RCX] = stackTop-64, 20
			if s := r.Run(); s.Reason != cpu.StopHalt || r.Regs.R[cpu.RAX] != 20 {
				t.Errorf("%v: %v rax %d", r, s, r.Regs.R[cpu.RAX])
				return false
			}
			r.Thread().Yield() // share CPU 0 with the tracer
			return true
		})
		var terr error
		tracer := e.mach.Start(e.mach.NewTask("tracer"), 0, 0, func(r *kernel.Runner) {
			for range 5 {
				c := &Consumer{Handler: func(*kernel.Runner) int { hits.Add(1); return 0 }}
				up, err := e.u.Register(r, e.inode, e.off("f"), c)
				if err == nil {
					err = e.u.UnregisterNosync(r, up, c)
				}
				if err != nil {
					terr = err
					return
				}
				e.u.UnregisterSync(r)
				r.Thread().Yield()
			}
		})
		<-tracer.Done()
		stop.Store(true)
		for _, h := range hitters {
			<-h.Done()
		}
		if terr != nil {
			t.Fatal(terr)
		}
		t.Logf("%d hits", hits.Load())
	})
}

// With all 31 XOL slots taken (slot 0 is the trampoline), a task waits for
// a slot, and gets the one freed.
func TestXolSlotWait(t *testing.T) {
	t.Parallel()
	a := &xolArea{freed: make(chan struct{})}
	a.used.Store(1)
	for i := 1; i < xolSlots; i++ {
		if s := a.getSlot(nil); s != i {
			t.Fatalf("slot %d, want %d", s, i)
		}
	}
	got := make(chan int)
	go func() { got <- a.getSlot(nil) }()
	for {
		if a.waiters.Load() == 1 {
			break
		}
		runtime.Gosched()
	}
	select {
	case s := <-got:
		t.Fatalf("got slot %d with all slots busy", s)
	default:
	}
	a.freeSlot(17)
	if s := <-got; s != 17 {
		t.Errorf("got slot %d, want the freed 17", s)
	}
}

// The words every CPU's single-stepped hits write (the uprobe's refcount,
// the XOL slot bitmap) are at least 128 bytes (a prefetched line pair) from
// every field the hits only read, wherever the object lands: otherwise two
// CPUs' hits bounce the lines of read-mostly fields (false sharing the
// kernel's layout does not have).
func TestHotWordsApart(t *testing.T) {
	t.Parallel()
	const apart = 128
	var up Uprobe
	var a xolArea
	for _, c := range []struct {
		name        string
		hot, cold   uintptr
		hotN, coldN uintptr
	}{
		{"ref/Inode", unsafe.Offsetof(up.ref), unsafe.Offsetof(up.Inode), unsafe.Sizeof(up.ref), unsafe.Sizeof(up.Inode)},
		{"ref/Offset", unsafe.Offsetof(up.ref), unsafe.Offsetof(up.Offset), unsafe.Sizeof(up.ref), unsafe.Sizeof(up.Offset)},
		{"ref/consumers", unsafe.Offsetof(up.ref), unsafe.Offsetof(up.consumers), unsafe.Sizeof(up.ref), unsafe.Sizeof(up.consumers)},
		{"ref/copied", unsafe.Offsetof(up.ref), unsafe.Offsetof(up.copied), unsafe.Sizeof(up.ref), unsafe.Sizeof(up.copied)},
		{"ref/orig", unsafe.Offsetof(up.ref), unsafe.Offsetof(up.orig), unsafe.Sizeof(up.ref), unsafe.Sizeof(up.orig)},
		{"ref/insn", unsafe.Offsetof(up.ref), unsafe.Offsetof(up.insn), unsafe.Sizeof(up.ref), unsafe.Sizeof(up.insn)},
		{"used/vaddr", unsafe.Offsetof(a.used), unsafe.Offsetof(a.vaddr), unsafe.Sizeof(a.used), unsafe.Sizeof(a.vaddr)},
		{"used/page", unsafe.Offsetof(a.used), unsafe.Offsetof(a.page), unsafe.Sizeof(a.used), unsafe.Sizeof(a.page)},
		{"used/waiters", unsafe.Offsetof(a.used), unsafe.Offsetof(a.waiters), unsafe.Sizeof(a.used), unsafe.Sizeof(a.waiters)},
	} {
		// The gap between the two fields, whichever comes first.
		gap := c.cold - (c.hot + c.hotN)
		if c.cold < c.hot {
			gap = c.hot - (c.cold + c.coldN)
		}
		if gap < apart {
			t.Errorf("%s: %d bytes apart, want at least %d", c.name, gap, apart)
		}
	}
}

// In a probed mm, an int3 of the program's own in execute-only text is not
// seen as a trap on a machine with protection keys: is_trap_at_addr()'s
// reads fail on the execute-only key (EFAULT), so handle_swbp() restarts the
// int3 instead of sending SIGTRAP, and the task never gets past it. Without
// keys the same text reads like r-x and the int3 delivers SIGTRAP.
func TestStrayBreakpointExecOnly(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		machine string
		sig     kernel.Signal
		rewound bool
	}{
		{"x86-64-pku", 0, true},
		{"x86-64", kernel.SIGTRAP, false},
	} {
		e := newEnv(t, 1, TasksTrace, loopProg)
		p := kernel.NewTaskMM(&e.mach.NS, "p", machine.MustNamed(c.machine).Features)
		p.MM.Hooks = e.u
		if _, err := p.MM.Mmap(p, textAddr, uint64(len(e.code)), mm.PROT_EXEC, mm.MAP_PRIVATE|mm.MAP_FIXED, e.file, 0); err != nil {
			t.Fatal(err)
		}
		k := newCounter(true, false, nil)
		mustRegister(t, e, "f", &k.c) // MMF_HAS_UPROBES: the hit path looks
		var sig kernel.Signal
		var rip uint64
		r := e.mach.Start(p, 0, 0, func(r *kernel.Runner) {
			r.Regs.RIP = e.addr("trap") + 1 // just after the int3 trapped
			sig = e.u.Int3(r)
			rip = r.Regs.RIP
		})
		sched.Wait(nil, "task exit", r.Done(), nil)
		if sig != c.sig || (rip == e.addr("trap")) != c.rewound {
			t.Errorf("%s: signal %v, rip %#x (the int3 at %#x)", c.machine, sig, rip, e.addr("trap"))
		}
	}
}

// New refuses a Config with any switch unset: no kernel picks SRCU, the
// before design, today's hit path or the call optimization by default.
func TestNewRefusesUnsetSwitch(t *testing.T) {
	t.Parallel()
	mach := kernel.NewMachine(machine.MustNamed("x86-64"), 1)
	defer mach.Stop()
	full := Config{Flavor: TasksTrace, HitPath: HitPathToday, Design: kernel.DesignBefore, Optimize: OptimizeCall}
	for name, unset := range map[string]func(c *Config){
		"flavour":      func(c *Config) { c.Flavor = 0 },
		"hit path":     func(c *Config) { c.HitPath = 0 },
		"design":       func(c *Config) { c.Design = 0 },
		"optimization": func(c *Config) { c.Optimize = 0 },
	} {
		c := full
		unset(&c)
		if _, err := New(mach, c); !errors.Is(err, design.ErrUnset) {
			t.Errorf("New with no %s: %v, want design.ErrUnset", name, err)
		}
	}
}
