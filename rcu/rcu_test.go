package rcu

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"mmlab/sched"
)

// flavour builds one flavour for sys; hook, if not nil, is called when a
// grace period starts waiting for readers.
type flavour struct {
	name string
	make func(sys *sched.System, hook func()) Flavor
}

var flavours = []flavour{
	{"srcu", func(sys *sched.System, hook func()) Flavor {
		s := NewSRCU(sys)
		s.waitHook = hook
		return s
	}},
	{"tasks-trace", func(sys *sched.System, hook func()) Flavor {
		tt := NewTasksTrace(sys)
		tt.waitHook = hook
		return tt
	}},
}

// gpWatch is a grace period under test: waiting receives when it starts
// waiting for readers, done is closed when it ends.
type gpWatch struct {
	waiting chan struct{}
	done    chan struct{}
}

func newGPWatch() *gpWatch {
	return &gpWatch{waiting: make(chan struct{}, 1), done: make(chan struct{})}
}

func (w *gpWatch) hook() {
	select {
	case w.waiting <- struct{}{}:
	default:
	}
}

// mustReachWait returns when the grace period waits for readers; it fails
// the test if the grace period ends first.
func (w *gpWatch) mustReachWait(t *testing.T) {
	t.Helper()
	select {
	case <-w.waiting:
	case <-w.done:
		t.Fatal("grace period ended while a reader that began before it was inside")
	}
}

func (w *gpWatch) mustNotBeDone(t *testing.T) {
	t.Helper()
	select {
	case <-w.done:
		t.Fatal("grace period ended while a reader that began before it was inside")
	default:
	}
}

// startSync runs f.Synchronize in a goroutine that closes w.done when it
// returns, and returns once the grace period waits for readers.
func (w *gpWatch) startSync(t *testing.T, f Flavor) {
	t.Helper()
	go func() { f.Synchronize(); close(w.done) }()
	w.mustReachWait(t)
}

// watchedFlavour returns a system of cpus CPUs, stopped when the test ends,
// and fl on it with a gpWatch on its grace periods.
func watchedFlavour(t *testing.T, fl flavour, cpus int) (*sched.System, Flavor, *gpWatch) {
	sys := sched.NewSystem(cpus)
	t.Cleanup(sys.Stop)
	w := newGPWatch()
	return sys, fl.make(sys, w.hook), w
}

// startReader spawns a thread on CPU cpu that enters a read section of f,
// stays inside while hold runs and then leaves. It returns the thread once
// the reader is inside.
func startReader(sys *sched.System, cpu int, f Flavor, hold func(th *sched.Thread)) *sched.Thread {
	inside := make(chan struct{})
	r := sys.Spawn(cpu, 0, func(th *sched.Thread) {
		idx := f.ReadLock(th)
		close(inside)
		hold(th)
		f.ReadUnlock(th, idx)
	})
	<-inside
	return r
}

// gate is a channel closed once, by the test or, on failure, by a deferred
// open so that threads waiting on it exit and System.Stop returns.
type gate struct {
	c    chan struct{}
	once sync.Once
}

func newGate() *gate  { return &gate{c: make(chan struct{})} }
func (g *gate) open() { g.once.Do(func() { close(g.c) }) }

// hold spends time inside a read section the way the test wants: sleeping
// (Block) or running, hitting Points, until release is closed.
func hold(th *sched.Thread, sleeping bool, release <-chan struct{}) {
	if sleeping {
		th.Block(func() { <-release })
		return
	}
	for {
		select {
		case <-release:
			return
		default:
			th.Point()
		}
	}
}

// A grace period never ends while a reader that began before it is inside,
// whether the reader runs (Tasks Trace must IPI it) or sleeps (Tasks Trace
// reads its state under the runqueue lock); it ends once the reader leaves.
func TestGPWaitsForReader(t *testing.T) {
	for _, fl := range flavours {
		for _, sleeping := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/sleeping=%v", fl.name, sleeping), func(t *testing.T) {
				sys, f, w := watchedFlavour(t, fl, 2)
				release := newGate()
				defer release.open()
				var r *sched.Thread
				if sleeping {
					inside := make(chan struct{})
					r = sys.Spawn(0, 0, func(th *sched.Thread) {
						idx := f.ReadLock(th)
						// Tell the test only once the CPU is given up, so
						// the grace period finds the reader asleep.
						th.Block(func() { close(inside); <-release.c })
						f.ReadUnlock(th, idx)
					})
					<-inside
				} else {
					r = startReader(sys, 0, f, func(th *sched.Thread) { hold(th, false, release.c) })
				}
				w.startSync(t, f)
				w.mustNotBeDone(t)
				release.open()
				<-w.done
				<-r.Done()
				// One grace period that waited; Tasks Trace had one
				// holdout, found by IPI exactly when it was running.
				st := f.Stats()
				want := GPStats{GPs: 1, Waits: st.Waits}
				if fl.name == "tasks-trace" {
					want.Waits = 1
					if !sleeping {
						want.IPIs = 1
					}
				}
				if st != want || st.Waits == 0 {
					t.Errorf("Stats() = %+v, want %+v with Waits > 0", st, want)
				}
			})
		}
	}
}

// A grace period does not wait for threads outside read sections, running or
// not, nor for an idle CPU.
func TestGPIgnoresQuiescentThreads(t *testing.T) {
	for _, fl := range flavours {
		t.Run(fl.name, func(t *testing.T) {
			sys, f, _ := watchedFlavour(t, fl, 2)
			release := make(chan struct{})
			running := make(chan struct{})
			a := sys.Spawn(0, 0, func(th *sched.Thread) {
				f.ReadUnlock(th, f.ReadLock(th)) // a section that ended
				close(running)
				hold(th, false, release)
			})
			b := sys.Spawn(0, 1, func(th *sched.Thread) { hold(th, true, release) })
			<-running
			f.Synchronize()
			f.Synchronize()
			close(release)
			<-a.Done()
			<-b.Done()
		})
	}
}

// Readers never block: while a grace period waits for a reader, that reader
// nests sections freely and other threads run whole sections; the grace
// period still waits for the outer section.
func TestReadersNeverBlock(t *testing.T) {
	for _, fl := range flavours {
		t.Run(fl.name, func(t *testing.T) {
			sys, f, w := watchedFlavour(t, fl, 2)
			inside, nest, nested, release := make(chan struct{}), newGate(), make(chan struct{}), newGate()
			defer nest.open()
			defer release.open()
			r := sys.Spawn(0, 0, func(th *sched.Thread) {
				outer := f.ReadLock(th)
				close(inside)
				th.Block(func() { <-nest.c })
				for range 100 {
					idx := f.ReadLock(th)
					inner := f.ReadLock(th)
					th.Point()
					f.ReadUnlock(th, inner)
					f.ReadUnlock(th, idx)
				}
				close(nested)
				hold(th, false, release.c)
				f.ReadUnlock(th, outer)
			})
			<-inside
			w.startSync(t, f)
			nest.open()
			<-nested
			other := sys.Spawn(1, 0, func(th *sched.Thread) {
				for range 100 {
					f.ReadUnlock(th, f.ReadLock(th))
					th.Point()
				}
			})
			<-other.Done()
			w.mustNotBeDone(t)
			release.open()
			<-w.done
			<-r.Done()
		})
	}
}

// Call runs its function only after a grace period: not while a reader that
// began before the Call is inside.
func TestCallAfterGP(t *testing.T) {
	for _, fl := range flavours {
		t.Run(fl.name, func(t *testing.T) {
			sys, f, w := watchedFlavour(t, fl, 2)
			release := newGate()
			defer release.open()
			r := startReader(sys, 1, f, func(th *sched.Thread) { hold(th, false, release.c) })
			f.Call(func() { close(w.done) }) // the callback ends w's grace period
			// The callback's grace period must wait for r.
			w.mustReachWait(t)
			w.mustNotBeDone(t)
			release.open()
			<-w.done
			f.Barrier()
			<-r.Done()
		})
	}
}

// A model thread may call Synchronize inside Block; Tasks Trace then reads
// the caller's own state under the runqueue lock.
func TestSynchronizeFromThread(t *testing.T) {
	for _, fl := range flavours {
		t.Run(fl.name, func(t *testing.T) {
			sys, f, _ := watchedFlavour(t, fl, 1)
			done := false
			th := sys.Spawn(0, 0, func(th *sched.Thread) {
				th.Block(f.Synchronize)
				done = true
			})
			<-th.Done()
			if !done {
				t.Error("Synchronize from a thread did not return")
			}
		})
	}
}

func TestTasksTraceUnbalancedUnlockPanics(t *testing.T) {
	sys := sched.NewSystem(1)
	defer sys.Stop()
	tt := NewTasksTrace(sys)
	var got any
	th := sys.Spawn(0, 0, func(th *sched.Thread) {
		defer func() { got = recover(); th.Trc.Nesting = 0 }()
		tt.ReadUnlock(th, 0)
	})
	<-th.Done()
	if got == nil {
		t.Error("ReadUnlock without ReadLock did not panic")
	}
}

// obj is an object readers find through a pointer; free poisons it with a
// plain store, so a reader still using it is a data race as well as a bad
// value.
type obj struct {
	val   int
	freed atomic.Bool
}

func (o *obj) free() {
	o.val = -1
	o.freed.Store(true)
}

// Stress: readers on both CPUs (running, preempted, sleeping inside their
// sections) and writers that replace the object and free the old one after
// Synchronize or through Call. A reader never sees a freed object.
func TestStressNoUseAfterFree(t *testing.T) {
	const writes = 150
	for _, fl := range flavours {
		t.Run(fl.name, func(t *testing.T) {
			sys := sched.NewSystem(2)
			f := fl.make(sys, nil)
			var cur atomic.Pointer[obj]
			cur.Store(&obj{val: 0})
			var bad, sections atomic.Int64
			var readers []*sched.Thread
			var started sync.WaitGroup
			for i := range 4 {
				started.Add(1)
				readers = append(readers, sys.Spawn(i%2, i/2, func(th *sched.Thread) {
					for n := 0; !th.Stopping(); n++ {
						if n == 1 {
							started.Done()
						}
						idx := f.ReadLock(th)
						p := cur.Load()
						for k := range 3 {
							if p.val < 0 || p.freed.Load() {
								bad.Add(1)
							}
							switch (n + k) % 7 {
							case 0:
								th.Block(func() {})
							case 1:
								th.Yield()
							default:
								th.Point()
							}
						}
						f.ReadUnlock(th, idx)
						sections.Add(1)
						th.Point()
					}
				}))
			}
			started.Wait() // every reader is in its loop
			var wg sync.WaitGroup
			for w := range 2 {
				wg.Go(func() {
					for i := range writes {
						old := cur.Swap(&obj{val: i + 1})
						if (i+w)%2 == 0 {
							f.Synchronize()
							old.free()
						} else {
							f.Call(old.free)
						}
					}
				})
			}
			wg.Wait()
			f.Barrier()
			sys.Stop()
			for _, r := range readers {
				<-r.Done()
			}
			if n := bad.Load(); n != 0 {
				t.Errorf("readers saw a freed object %d times", n)
			}
			if sections.Load() == 0 {
				t.Error("no read section ran")
			}
		})
	}
}

// Two Tasks Trace domains share each thread's nesting count: concurrent
// grace periods of both wait for a reader of one, and both end when it
// leaves (the second flags the holdout on top of the first).
func TestTasksTraceTwoDomains(t *testing.T) {
	sys := sched.NewSystem(2)
	defer sys.Stop()
	w1, w2 := newGPWatch(), newGPWatch()
	tt1, tt2 := NewTasksTrace(sys), NewTasksTrace(sys)
	tt1.waitHook, tt2.waitHook = w1.hook, w2.hook
	release := newGate()
	defer release.open()
	r := startReader(sys, 0, tt1, func(th *sched.Thread) { hold(th, true, release.c) })
	w1.startSync(t, tt1)
	w2.startSync(t, tt2)
	release.open()
	<-w1.done
	<-w2.done
	<-r.Done()
}
