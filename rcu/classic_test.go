package rcu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"mmlab/sched"
)

func newClassicWatched(sys *sched.System) (*Classic, *gpWatch) {
	c := NewClassic(sys)
	w := newGPWatch()
	c.waitHook = w.hook
	return c, w
}

// A grace period does not end while a reader on a model CPU is inside its
// section (the reader holds its CPU and reaches no Point); it ends once the
// reader has left and its CPU ran the IPI. Nested sections: leaving the
// inner one ends nothing.
func TestClassicGPWaitsForReader(t *testing.T) {
	for _, nested := range []bool{false, true} {
		t.Run(map[bool]string{false: "flat", true: "nested"}[nested], func(t *testing.T) {
			sys := sched.NewSystem(2)
			defer sys.Stop()
			c, w := newClassicWatched(sys)
			inside, release := make(chan struct{}), newGate()
			defer release.open()
			r := sys.Spawn(0, 0, func(th *sched.Thread) {
				idx := c.ReadLock(th)
				if nested {
					inner := c.ReadLock(th)
					c.ReadUnlock(th, inner)
				}
				close(inside)
				<-release.c // holds CPU 0: no Point, no IPI answered
				c.ReadUnlock(th, idx)
			})
			<-inside
			w.startSync(t, c)
			w.mustNotBeDone(t)
			release.open()
			<-w.done
			<-r.Done()
			// CPU 1 had no thread and answered at once; CPU 0 was
			// IPIed if the IPI came before the reader exited (the
			// hook runs as the IPIs are being sent, not after).
			if st := c.Stats(); st.GPs != 1 || st.IPIs > 1 || st.Waits != st.IPIs {
				t.Errorf("Stats() = %+v, want 1 grace period and at most 1 IPI", st)
			}
		})
	}
}

// With every CPU idle a grace period ends at once, with no IPI to wait for.
func TestClassicIdleGP(t *testing.T) {
	sys := sched.NewSystem(2)
	defer sys.Stop()
	c := NewClassic(sys)
	c.Synchronize()
	if st, want := c.Stats(), (GPStats{GPs: 1}); st != want {
		t.Errorf("Stats() = %+v, want %+v", st, want)
	}
}

// A CPU whose thread runs, outside any read section, answers the IPI at its
// next Point and goes on running: the grace period ends while the thread
// still runs (it stops only after), with exactly one IPI.
func TestClassicIPIRunningCPU(t *testing.T) {
	sys := sched.NewSystem(2)
	defer sys.Stop()
	c := NewClassic(sys)
	running, release := make(chan struct{}), newGate()
	defer release.open()
	r := sys.Spawn(0, 0, func(th *sched.Thread) {
		close(running)
		hold(th, false, release.c) // Points until released
	})
	<-running
	c.Synchronize()
	release.open()
	<-r.Done()
	if st, want := c.Stats(), (GPStats{GPs: 1, Waits: 1, IPIs: 1}); st != want {
		t.Errorf("Stats() = %+v, want %+v", st, want)
	}
}

// A model thread calls Synchronize inside Block, and its own CPU answers the
// IPI meanwhile.
func TestClassicSynchronizeOnThread(t *testing.T) {
	sys := sched.NewSystem(2)
	defer sys.Stop()
	c := NewClassic(sys)
	u := sys.Spawn(0, 0, func(th *sched.Thread) { th.Block(c.Synchronize) })
	<-u.Done()
	if st := c.Stats(); st.GPs != 1 {
		t.Errorf("Stats().GPs = %d, want 1", st.GPs)
	}
}

// Call's callback runs only after a grace period: not while a reader that
// was inside when Call was made is still inside. Barrier waits for every
// callback queued before it.
func TestClassicCall(t *testing.T) {
	sys := sched.NewSystem(2)
	defer sys.Stop()
	c, w := newClassicWatched(sys)
	release := newGate()
	defer release.open()
	r := startReader(sys, 1, c, func(*sched.Thread) { <-release.c })
	c.Call(func() { close(w.done) }) // the callback ends w's grace period
	w.mustReachWait(t)
	w.mustNotBeDone(t)
	release.open()
	<-w.done
	<-r.Done()

	var n atomic.Int32
	for range 3 {
		c.Call(func() { n.Add(1) })
	}
	c.Barrier()
	if got := n.Load(); got != 3 {
		t.Errorf("after Barrier %d of 3 callbacks ran", got)
	}
}

// readUnlockPanic runs body inside a read section on th and returns what
// ReadUnlock panicked with (nil: no panic).
func readUnlockPanic(c *Classic, th *sched.Thread, body func()) (p any) {
	defer func() { p = recover() }()
	idx := c.ReadLock(th)
	body()
	c.ReadUnlock(th, idx)
	return nil
}

// Giving up the CPU inside a read section is caught at ReadUnlock: sleeping
// (Block) and being preempted at a Point by a better-priority thread. A
// Point with nothing to do, outside or inside, is not a switch.
func TestClassicSwitchInsideSectionPanics(t *testing.T) {
	sys := sched.NewSystem(1)
	defer sys.Stop()
	c := NewClassic(sys)
	got := make(chan any, 3)
	th := sys.Spawn(0, 5, func(th *sched.Thread) {
		got <- readUnlockPanic(c, th, th.Point)
		got <- readUnlockPanic(c, th, func() { th.Block(func() {}) })
		got <- readUnlockPanic(c, th, func() {
			sys.Spawn(0, 0, func(*sched.Thread) {}) // better priority
			th.Point()                              // preempted here
		})
	})
	<-th.Done()
	if p := <-got; p != nil {
		t.Errorf("idle Point inside a section: panic %v, want none", p)
	}
	for _, what := range []string{"Block", "preemption at Point"} {
		if p := <-got; p == nil {
			t.Errorf("%s inside a section: no panic", what)
		}
	}
}

// poisonObj is what the stress test publishes; dead is a plain field, set
// only after a grace period, so the race detector checks the grace period's
// happens-before edges too.
type poisonObj struct {
	val  int
	dead bool
}

// Readers on model threads never see an object that was unpublished, then
// poisoned after Synchronize (or by a Call callback). Run with -race.
func TestClassicStressPoison(t *testing.T) {
	const (
		readersPerCPU = 2
		updates       = 300
	)
	sys := sched.NewSystem(2)
	defer sys.Stop()
	c := NewClassic(sys)
	var p atomic.Pointer[poisonObj]
	p.Store(&poisonObj{val: 0})
	var stop atomic.Bool
	var bad, sections atomic.Int64
	var readers []*sched.Thread
	for cpu := range 2 {
		for range readersPerCPU {
			readers = append(readers, sys.Spawn(cpu, 0, func(th *sched.Thread) {
				for i := 0; !stop.Load(); i++ {
					idx := ReadLock(th)
					o := p.Load()
					for k := range 4 {
						if o.dead {
							bad.Add(1)
						}
						if k == 1 && i%4 == 0 {
							runtime.Gosched() // let the updater run meanwhile
						}
					}
					ReadUnlock(th, idx)
					sections.Add(1)
					th.Yield() // a Point; lets the CPU's other reader run
				}
			}))
		}
	}
	var wg sync.WaitGroup
	for u := range 2 {
		wg.Go(func() {
			for i := range updates {
				n := &poisonObj{val: i}
				old := p.Swap(n)
				if u == 0 {
					c.Synchronize()
					old.dead = true
				} else {
					c.Call(func() { old.dead = true })
				}
			}
		})
	}
	wg.Wait()
	c.Barrier()
	stop.Store(true)
	for _, r := range readers {
		<-r.Done()
	}
	if n := bad.Load(); n != 0 {
		t.Errorf("readers saw a poisoned object %d times", n)
	}
	if st := c.Stats(); st.GPs < updates {
		t.Errorf("Stats().GPs = %d, want at least %d", st.GPs, updates)
	}
	t.Logf("%d read sections, %+v", sections.Load(), c.Stats())
}

// The classic read side on a model thread: a ReadLock/ReadUnlock pair.
func BenchmarkClassicRead(b *testing.B) {
	sys := sched.NewSystem(1)
	defer sys.Stop()
	th := sys.Spawn(0, 0, func(th *sched.Thread) {
		for b.Loop() {
			ReadUnlock(th, ReadLock(th))
		}
	})
	<-th.Done()
}
