package uprobes

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"mmlab/kernel"
	"mmlab/mm"
	"mmlab/mm/pgtable"
)

// (e) In both designs, randomized: tracers register and unregister (each
// on its own offset), forkers fork, fork again from the child and exit,
// and a busy process populates and unmaps while a second thread of it
// forks. Invariants, checked as the run goes:
//   - after a register returns, every mm that maps the file has the 0xCC at
//     the offset; after an unregister returns, none has it;
//   - a child forked while an offset was stably registered (or stably not)
//     has (or has not) the 0xCC, whichever its parent had.
//
// At the end every mm has the original bytes and the registry is empty.
//
// It runs on real goroutines, whose runs cannot be repeated, and under the
// deterministic scheduler with -det.seeds seeds: a failing seed is printed
// with its decisions and replays with -det.seed=N -det.seeds=1.
func TestSeed000StressInvariants(t *testing.T) {
	for _, d := range designs {
		t.Run(d.String(), func(t *testing.T) {
			forModes(t, d, stressInvariants)
		})
	}
}

func stressInvariants(t *testing.T, e *env) {
	d := e.u.design
	labels := []string{"f", "g", "g_pop"}
	offs := make([]uint64, len(labels))
	for i, l := range labels {
		offs[i] = e.off(l)
	}
	// gen[i] counts transitions of offset i: 0 mod 4 not
	// registered, 1 registering, 2 registered, 3 unregistering.
	gen := make([]atomic.Int64, len(offs))
	var stop atomic.Bool
	var tracers, others []*outcome
	fail := func(format string, args ...any) { t.Errorf(format, args...) }

	// byteIn reads the byte m maps at vaddr, false if m is gone.
	byteIn := func(m *mm.MM, vaddr uint64) (byte, bool) {
		b, err := m.LoadByte(nil, vaddr)
		return b, err == nil
	}
	// checkAll: every mm mapping the file has want at offset off.
	// An mm whose last user is gone is being torn down: uprobes
	// skips it (mmget_not_zero), and so does the check.
	checkAll := func(off uint64, want byte, what string) {
		for _, v := range e.inode.IMmap(off>>pgtable.PageShift, 1) {
			if !mmgetNotZero(v.MM) {
				continue
			}
			if b, ok := byteIn(v.MM, offsetToVaddr(v, off)); ok && b != want {
				fail("after %s at %#x: mm %d has %#x, want %#x", what, off, v.MM.ID, b, want)
			}
			mmput(v.MM)
		}
	}

	for i := range offs {
		tracers = append(tracers, e.spawn("tracer", func() error {
			tr := e.mach.NewTask("tracer")
			k := newCounter(true, false, nil)
			for range 12 {
				gen[i].Add(1)
				up, err := e.u.Register(tr, e.inode, offs[i], &k.c)
				if err != nil {
					fail("register: %v", err)
					return nil
				}
				gen[i].Add(1)
				checkAll(offs[i], swbp, "register")
				gen[i].Add(1)
				if err := e.u.UnregisterNosync(tr, up, &k.c); err != nil {
					fail("unregister: %v", err)
					return nil
				}
				gen[i].Add(1)
				checkAll(offs[i], e.code[offs[i]], "unregister")
			}
			return nil
		}))
	}

	// forkCheck forks p and checks the child against the offsets
	// that were stable meanwhile.
	forkCheck := func(p *kernel.Task) *kernel.Task {
		g1 := make([]int64, len(offs))
		for i := range offs {
			g1[i] = gen[i].Load()
		}
		c, err := p.Fork()
		if err != nil {
			fail("fork: %v", err)
			return nil
		}
		for i, off := range offs {
			b, ok := byteIn(c.MM, textAddr+off)
			if !ok || gen[i].Load() != g1[i] || g1[i]%2 != 0 {
				continue
			}
			want := e.code[off]
			if g1[i]%4 == 2 {
				want = swbp
			}
			if b != want {
				fail("child of %v at %#x: %#x, want %#x (gen %d)", p, off, b, want, g1[i])
			}
		}
		return c
	}

	for n := range 2 {
		others = append(others, e.spawn("forker", func() error {
			p := e.newProc(t, "forker")
			rng := rand.New(rand.NewPCG(uint64(n), 1))
			for !stop.Load() {
				c := forkCheck(p)
				if c == nil {
					return nil
				}
				if rng.IntN(2) == 0 {
					if gc := forkCheck(c); gc != nil {
						gc.ExitMM()
					}
				}
				c.ExitMM()
			}
			return nil
		}))
	}
	busy := e.newProc(t, "busy")
	bt := busy.NewThread()
	others = append(others, e.spawn("busy", func() error {
		for !stop.Load() {
			a, err := busy.MM.Mmap(busy, 0, 64*pgtable.PageSize, mm.PROT_READ|mm.PROT_WRITE,
				mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_POPULATE, nil, 0)
			if err != nil {
				fail("busy mmap: %v", err)
				return nil
			}
			if err := busy.MM.Munmap(busy, a, 64*pgtable.PageSize); err != nil {
				fail("busy munmap: %v", err)
				return nil
			}
		}
		return nil
	}), e.spawn("busy-thread", func() error {
		for !stop.Load() {
			if c := forkCheck(bt); c != nil {
				c.ExitMM()
			}
		}
		return nil
	}))

	for _, o := range tracers {
		_ = o.wait()
	}
	stop.Store(true)
	for _, o := range others {
		_ = o.wait()
	}
	for _, off := range offs {
		checkAll(off, e.code[off], "the run")
	}
	if n := e.u.Len(); n != 0 {
		t.Errorf("%d uprobes left in the registry", n)
	}
	if d == kernel.DesignAfter && !e.mach.Sys.Deterministic() {
		t.Logf("passes: %d for %d register/unregister calls", e.u.Passes(), 2*12*len(offs))
	}
}
