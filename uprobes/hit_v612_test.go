package uprobes

import (
	"errors"
	"testing"

	"mmlab/cpu"
	"mmlab/errno"
	"mmlab/kernel"
	"mmlab/mm"
	"mmlab/sched"
)

// On the v6.12 hit path every hit takes the mmap read lock for the VMA
// lookup; today's finds the VMA without it.
func TestHitPathMmapReadLockPerHit(t *testing.T) {
	t.Parallel()
	const calls = 50
	for _, kc := range kernels {
		t.Run(kernelName(kc), func(t *testing.T) {
			e := newEnvConfig(t, 1, kc, loopProg)
			k := newCounter(true, false, nil)
			mustRegister(t, e, "f", &k.c)
			p := e.newProc(t, "p")
			e.run(t, p, 0, "main", func(r *cpu.Regs) { r.R[cpu.RCX] = 1 }) // faults the pages in
			before := p.MM.MmapLock.Stats().Acquisitions
			wantHalt(t, e.run(t, p, 0, "main", func(r *cpu.Regs) { r.R[cpu.RCX] = calls }))
			got := p.MM.MmapLock.Stats().Acquisitions - before
			if k.hits != calls+1 {
				t.Fatalf("%d hits, want %d", k.hits, calls+1)
			}
			if kc.HitPath == HitPathV612 && got < calls || kc.HitPath == HitPathToday && got >= calls {
				t.Errorf("%d mmap lock acquisitions for %d hits", got, calls)
			}
		})
	}
}

// On the v6.12 hit path a pending return instance holds a reference on its
// uprobe (try_get_uprobe in prepare_uretprobe), dropped when it is freed;
// today's holds a lease instead and leaves the count alone.
func TestReturnInstanceReference(t *testing.T) {
	t.Parallel()
	for _, kc := range kernels {
		t.Run(kernelName(kc), func(t *testing.T) {
			e := newEnvConfig(t, 1, kc, retProg)
			f1 := mustRegister(t, e, "f1", &Consumer{RetHandler: func(uint64, *kernel.Runner) {}})
			base := f1.Refs()
			var inside int64 = -1
			mustRegister(t, e, "g1", &Consumer{Handler: func(*kernel.Runner) int { inside = f1.Refs(); return 0 }})
			p := e.newProc(t, "p")
			wantHalt(t, e.run(t, p, 0, "nest", nil))
			want := base
			if kc.HitPath == HitPathV612 {
				want++
			}
			if inside != want {
				t.Errorf("f1's references with its return pending: %d, want %d (registered: %d)", inside, want, base)
			}
			if f1.Refs() != base {
				t.Errorf("f1's references after the return: %d, want %d", f1.Refs(), base)
			}
		})
	}
}

// uprobe_apply walks the consumers in a read section of the flavour and
// fails with ENOENT for a consumer that is not the uprobe's.
func TestApply(t *testing.T) {
	t.Parallel()
	for _, kc := range kernels {
		t.Run(kernelName(kc), func(t *testing.T) {
			e := newEnvConfig(t, 1, kc, loopProg)
			p := e.newProc(t, "p")
			var th *sched.Thread // the tracer's, once it runs
			nesting := -1        // the tracer's Tasks Trace nesting in the filter
			c := &Consumer{Handler: func(*kernel.Runner) int { return 0 }, Filter: func(*mm.MM) bool {
				if th != nil {
					nesting = th.Trc.Nesting
				}
				return true
			}}
			up := mustRegister(t, e, "f", c)
			var errOther, errOwn error
			r := e.mach.Start(e.mach.NewTask("tracer"), 0, 0, func(r *kernel.Runner) {
				errOther = e.u.Apply(r, up, &Consumer{Handler: c.Handler}, false)
				th = r.Task.Thread
				errOwn = e.u.Apply(r, up, c, true)
			})
			<-r.Done()
			if !errors.Is(errOther, errno.ENOENT) {
				t.Errorf("apply of another consumer: %v, want ENOENT", errOther)
			}
			if errOwn != nil {
				t.Errorf("apply of the consumer: %v", errOwn)
			}
			// SRCU's read section leaves nothing on the thread to see.
			if kc.Flavor == TasksTrace && nesting != 1 {
				t.Errorf("Tasks Trace nesting in the filter during apply: %d, want 1", nesting)
			}
			if byteAt(t, p.MM, e.addr("f")) != swbp {
				t.Error("no breakpoint after apply")
			}
		})
	}
}
