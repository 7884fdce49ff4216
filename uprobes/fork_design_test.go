package uprobes

import (
	"errors"
	"testing"

	"mmlab/cpu"
	"mmlab/design"
	"mmlab/errno"
	"mmlab/kernel"
	"mmlab/mm"
	"mmlab/sched"
)

// Seed 000's tests: each drives one interleaving explicitly (the fork
// hooks and step semaphores; polling only for "a task is now queued on a
// lock") and checks that the two designs tell apart. Each runs twice: on
// real goroutines, and under the deterministic scheduler with several seeds
// (forModes), where the chooser interleaves everything the steps leave
// open.

var designs = kernel.Designs.Values()

// Each design's name is what String returns and Designs.Parse reads; any
// other name is refused.
func TestDesignNames(t *testing.T) {
	t.Parallel()
	for d, name := range map[kernel.Design]string{kernel.DesignBefore: "before", kernel.DesignAfter: "after"} {
		got, err := kernel.Designs.Parse(name)
		if d.String() != name || err != nil || got != d {
			t.Errorf("%q: String %q, Designs.Parse %v, %v", name, d.String(), got, err)
		}
	}
	if _, err := kernel.Designs.Parse("during"); !errors.Is(err, design.ErrUnknown) {
		t.Errorf(`Designs.Parse("during") = %v, want design.ErrUnknown`, err)
	}
}

// designEnv is newEnv with uprobes in design d.
func designEnv(t *testing.T, d kernel.Design) *env {
	return newEnvConfig(t, 1, Config{Flavor: TasksTrace, Design: d, HitPath: HitPathToday, Optimize: OptimizeCall}, loopProg)
}

// until spins (sched.Relax) until cond holds: used only to learn that
// another task is now queued on a lock.
func until(cond func() bool) {
	for !cond() {
		sched.Relax("until")
	}
}

// (a) A process B that maps the file holds its mmap lock (a populate); a
// registration reaches B. Before: it sleeps on B's lock holding
// dup_mmap_sem for write, so an unrelated fork queues on dup_mmap_sem until
// B lets go. After: the registration waits for B without dup_mmap_sem and
// the fork completes without blocking; the registration then redoes its
// pass and finds the fork's child too.
func TestSeed000ForkDoesNotWaitForBusyRegistration(t *testing.T) {
	forDesigns(t, func(t *testing.T, d kernel.Design, e *env) {
		b := e.newProc(t, "busy")
		f := e.newProc(t, "forker")
		b.MM.MmapReadLock(nil) // B populates
		tracer := e.mach.NewTask("tracer")
		k := newCounter(true, false, nil)
		reg := e.spawn("tracer", func() error {
			_, err := e.u.Register(tracer, e.inode, e.off("f"), &k.c)
			return err
		})
		until(b.MM.MmapLock.IsContended) // the registration waits for B
		if got := e.u.DupMmapSem.IsWriteLocked(); got != (d == kernel.DesignBefore) {
			t.Fatalf("dup_mmap_sem write-held while waiting for B: %v", got)
		}
		var child *kernel.Task
		forked := e.spawn("forker", func() error {
			var err error
			child, err = f.Fork()
			return err
		})
		if d == kernel.DesignBefore {
			until(func() bool { return e.u.DupMmapSem.Waiters() == 1 })
			if forked.finished() || reg.finished() {
				t.Fatal("fork or registration finished while B holds its lock")
			}
			b.MM.MmapReadUnlock()
			if err := reg.wait(); err != nil {
				t.Fatal(err)
			}
			if err := forked.wait(); err != nil {
				t.Fatal(err)
			}
			if f.Blocked()["dup_mmap_sem"].Count == 0 {
				t.Error("the fork did not block on dup_mmap_sem")
			}
		} else {
			if err := forked.wait(); err != nil {
				t.Fatal(err)
			}
			if reg.finished() {
				t.Fatal("registration finished while B holds its lock")
			}
			if bl := f.Blocked(); len(bl) != 0 {
				t.Errorf("the fork blocked: %v", bl)
			}
			b.MM.MmapReadUnlock()
			if err := reg.wait(); err != nil {
				t.Fatal(err)
			}
			if got := e.u.Passes(); got != 2 {
				t.Errorf("passes %d, want 2 (B was busy once)", got)
			}
		}
		for _, q := range []*kernel.Task{b, f, child} {
			if byteAt(t, q.MM, e.addr("f")) != swbp {
				t.Errorf("%v has no breakpoint after the registration", q)
			}
		}
	})
}

// The after design's pass makes progress against a process that takes its
// lock again at once. B holds its lock; whenever the registration waits for
// it, B lets it go, and the moment the registration has it (hooks.waited) B
// asks for it again, so B gets it back as soon as the registration lets go.
// The registration keeps B's write lock from the end of its wait to the end
// of the next pass, so it needs exactly two passes. (A design that dropped
// B's lock before redoing the pass would find B busy again in every pass:
// with an unlock after hooks.waited in registerForEachVMAAfter, this test
// fails at its step bound.)
func TestSeed000PassProgress(t *testing.T) {
	forModes(t, kernel.DesignAfter, func(t *testing.T, e *env) {
		b := e.newProc(t, "busy")
		relock, held, step := newSem(), newSem(), newSem()
		stop := false // written by the test before its last step.post
		busy := e.spawn("busy", func() error {
			for {
				b.MM.MmapReadLock(b)
				held.post()
				step.take()
				b.MM.MmapReadUnlock()
				if stop {
					return nil
				}
				relock.take()
			}
		})
		held.take()
		e.u.setWaitedHook(func(m *mm.MM) {
			relock.post()
			until(m.MmapLock.IsContended) // B waits for its lock again
		})
		k := newCounter(true, false, nil)
		reg := e.spawn("tracer", func() error {
			_, err := e.u.Register(e.mach.NewTask("tracer"), e.inode, e.off("f"), &k.c)
			return err
		})
		for steps := 0; ; steps++ {
			until(func() bool { return b.MM.MmapLock.IsContended() || reg.finished() })
			if reg.finished() {
				break
			}
			if steps > 5 {
				t.Fatalf("B let go %d times and the registration still waits (passes %d)", steps, e.u.Passes())
			}
			step.post() // B lets go; the registration takes the lock
			held.take() // and B has it again
		}
		if err := reg.wait(); err != nil {
			t.Fatal(err)
		}
		if got := e.u.Passes(); got != 2 {
			t.Errorf("passes %d, want 2", got)
		}
		stop = true
		step.post()
		if err := busy.wait(); err != nil {
			t.Fatal(err)
		}
		if byteAt(t, b.MM, e.addr("f")) != swbp {
			t.Error("B has no breakpoint")
		}
	})
}

// (b) Patch 7. A perf-style consumer inherited by the child: its filter
// accepts the mm of any of its target tasks (trace_uprobe_filter's
// event->hw.target->mm), and the child is a target from before its mm is
// copied (perf_event_init_task). Another consumer of the same uprobe is
// removed while the fork runs. Before: the removal visits the child's mm
// after dup_mmap_sem was dropped but before tsk->mm is set, so the filter
// does not recognise it and the child loses the breakpoint it inherited.
// After: tsk->mm is set before the child is findable, so it keeps it.
func TestSeed000InheritedPerfEventKeepsBreakpoint(t *testing.T) {
	forDesigns(t, func(t *testing.T, d kernel.Design, e *env) {
		p := e.newProc(t, "parent")
		targets := []*kernel.Task{p} // written before the removal starts
		perf := newCounter(true, false, func(m *mm.MM) bool {
			for _, tk := range targets {
				if tk.MM == m {
					return true
				}
			}
			return false
		})
		other := newCounter(true, false, nil)
		up := mustRegister(t, e, "f", &perf.c)
		mustRegister(t, e, "f", &other.c)
		var removed *outcome
		child, err := p.ForkWith(kernel.ForkHooks{
			InitTask: func(c *kernel.Task) { targets = append(targets, c) },
			OnVMA: func(n int) {
				if n != 1 {
					return
				}
				removed = e.spawn("perf-close", func() error {
					return e.u.UnregisterNosync(e.mach.NewTask("perf-close"), up, &other.c)
				})
				until(e.u.DupMmapSem.IsWriteLocked) // queued behind this fork
			},
			BeforeSetMM: func(*kernel.Task) {
				if err := removed.wait(); err != nil {
					t.Error(err)
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := removed.wait(); err != nil {
			t.Fatal(err)
		}
		want := byte(swbp)
		if d == kernel.DesignBefore {
			want = 0x90 // the nop: the breakpoint is lost
		}
		if got := byteAt(t, child.MM, e.addr("f")); got != want {
			t.Errorf("child's byte at f %#x, want %#x", got, want)
		}
		if byteAt(t, p.MM, e.addr("f")) != swbp {
			t.Error("parent lost its breakpoint")
		}
	})
}

// (c) Patch 8. P1 and P2 map the file; the tracer unregisters, removes the
// breakpoint from P1, and is killed while it waits for P2's busy lock.
// Before: every later write fails with EINTR, the uprobe is leaked (stays
// in the registry, never freed) and P2 keeps its 0xCC. After: the removal
// completes, no 0xCC is left, the uprobe is freed.
func TestSeed000KilledUnregisterCompletes(t *testing.T) {
	forDesigns(t, func(t *testing.T, d kernel.Design, e *env) {
		p1, p2 := e.newProc(t, "p1"), e.newProc(t, "p2")
		k := newCounter(true, false, nil)
		up := mustRegister(t, e, "f", &k.c)
		p2.MM.MmapReadLock(nil)
		tracer := e.mach.NewTask("tracer")
		done := e.spawn("tracer", func() error { return e.u.UnregisterNosync(tracer, up, &k.c) })
		until(p2.MM.MmapLock.IsContended)
		tracer.Kill()
		p2.MM.MmapReadUnlock()
		err := done.wait()
		e.u.UnregisterSync(nil)
		e.u.uretSRCU.Barrier()
		e.u.flavor.Barrier()
		if byteAt(t, p1.MM, e.addr("f")) != 0x90 {
			t.Error("p1 keeps the breakpoint")
		}
		if d == kernel.DesignBefore {
			if !errors.Is(err, errno.EINTR) {
				t.Errorf("unregister: %v, want EINTR", err)
			}
			if byteAt(t, p2.MM, e.addr("f")) != swbp {
				t.Error("p2 lost the breakpoint: no half-way stop")
			}
			if up.Freed() || e.u.Lookup(e.inode, e.off("f")) != up {
				t.Error("the uprobe was not leaked")
			}
			// The leaked uprobe is still in the tree, so a hit on
			// the leftover int3 is absorbed (no consumer, the nop
			// emulated): a trap per call, forever.
			res := e.run(t, p2, 0, "main", calls(3))
			wantHalt(t, res)
			if res.regs.R[cpu.RAX] != 3 || k.hits != 0 {
				t.Errorf("rax %d hits %d, want 3 calls and no handler", res.regs.R[cpu.RAX], k.hits)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if byteAt(t, p2.MM, e.addr("f")) != 0x90 {
			t.Error("p2 keeps the breakpoint")
		}
		if !up.Freed() || e.u.Len() != 0 {
			t.Error("the uprobe was not freed")
		}
	})
}

// (d) Patch 2. A fork fails with ENOMEM after copying one VMA (the text); a
// registration queued on dup_mmap_sem meanwhile. Before: the half-built
// child is torn down inside the read section, so the registration is still
// blocked when the teardown starts. After: dup_mmap_sem is dropped first,
// and the registration completes before the teardown begins.
func TestSeed000FailedForkTeardown(t *testing.T) {
	forDesigns(t, func(t *testing.T, d kernel.Design, e *env) {
		p := e.newProc(t, "parent")
		k := newCounter(true, false, nil)
		var reg *outcome
		tornDown := false
		_, err := p.ForkWith(kernel.ForkHooks{
			FailAfter: 1,
			OnVMA: func(int) {
				reg = e.spawn("tracer", func() error {
					_, err := e.u.Register(e.mach.NewTask("tracer"), e.inode, e.off("f"), &k.c)
					return err
				})
				until(e.u.DupMmapSem.WriterWaitingForReaders)
			},
			Teardown: func() {
				tornDown = true
				if d == kernel.DesignBefore {
					if reg.finished() || !e.u.DupMmapSem.WriterWaitingForReaders() {
						t.Error("the registration is not blocked by the teardown")
					}
					return
				}
				if err := reg.wait(); err != nil {
					t.Error(err)
				}
				if e.u.DupMmapSem.Readers() != 0 {
					t.Error("teardown inside dup_mmap_sem")
				}
			},
		})
		if !errors.Is(err, errno.ENOMEM) || !tornDown {
			t.Fatalf("fork: %v (torn down %v), want ENOMEM and a teardown", err, tornDown)
		}
		if err := reg.wait(); err != nil {
			t.Fatal(err)
		}
		if n := len(e.inode.IMmap(0, 1)); n != 1 {
			t.Errorf("%d VMAs map the file after the failed fork, want the parent's only", n)
		}
		if byteAt(t, p.MM, e.addr("f")) != swbp {
			t.Error("parent has no breakpoint")
		}
	})
}
