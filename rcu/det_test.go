package rcu

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"mmlab/sched"
)

// The grace-period tests under the deterministic scheduler: the property
// is checked at every scheduling decision (Config.Check) of runs under many
// seeds, instead of at the few moments a real-time test can stop at.

const detGPSeeds = 32

// detFlavours are the flavours of these tests, classic RCU included.
var detFlavours = []struct {
	name string
	make func(sys *sched.System) Flavor
	// sleepable: readers may pass preemption points and sleep inside.
	sleepable bool
}{
	{"srcu", func(sys *sched.System) Flavor { return NewSRCU(sys) }, true},
	{"tasks-trace", func(sys *sched.System) Flavor { return NewTasksTrace(sys) }, true},
	{"rcu", func(sys *sched.System) Flavor { return NewClassic(sys) }, false},
}

// gpState is what the tasks of a deterministic grace-period test tell the
// check. Only the running thread and the check (while no thread runs)
// touch it.
type gpState struct {
	inside   int  // readers inside a section that began before the wait began
	waiting  bool // a grace period (or Call) has begun
	ended    bool // it has ended (or the callback ran)
	violated bool
}

func (s *gpState) check() error {
	if s.ended && s.inside > 0 {
		s.violated = true
		return errors.New("a grace period ended while a reader that began before it was inside")
	}
	return nil
}

// hold spends a reader's section: sleeping on the virtual clock, passing
// preemption points, or (classic RCU) running without either.
func detHold(th *sched.Thread, sleepable bool, i int) {
	switch {
	case !sleepable:
		for range 3 {
			_ = th.ID() // work, no preemption point
		}
	case i%2 == 0:
		th.Block(func() { sched.Sleep(time.Duration(i+1) * time.Millisecond) })
	default:
		for range 5 {
			th.Point()
			th.Yield()
		}
	}
}

// runGPScenario runs readers against one updater whose wait (Synchronize,
// or Call followed by Barrier) must outlast every section that began
// before it.
func runGPScenario(t *testing.T, name string, mk func(*sched.System) Flavor, sleepable, call bool, seed uint64) {
	t.Helper()
	st := &gpState{}
	sys := sched.New(sched.Config{CPUs: 2, Deterministic: true, Seed: seed, Check: st.check})
	f := mk(sys)
	for i := range 3 {
		sys.SpawnNamed(fmt.Sprintf("reader%d", i), i%2, 0, func(th *sched.Thread) {
			for n := range 3 {
				idx := f.ReadLock(th)
				before := !st.waiting
				if before {
					st.inside++
				}
				detHold(th, sleepable, i+n)
				if before {
					st.inside--
				}
				f.ReadUnlock(th, idx)
			}
		})
	}
	sys.SpawnNamed("updater", 1, 0, func(th *sched.Thread) {
		th.Yield()
		st.waiting = true
		if call {
			f.Call(func() { st.ended = true })
			th.Block(f.Barrier)
			if !st.ended {
				t.Error("Barrier returned before the callback ran")
			}
			return
		}
		th.Block(f.Synchronize)
		st.ended = true
	})
	rec, err := sys.Run()
	if err != nil || st.violated || !st.ended {
		t.Fatalf("%s seed %d: %v (ended %v)\n%v", name, seed, err, st.ended, rec)
	}
}

// A grace period never ends while a reader that began before it is inside;
// it ends once they have left.
func TestDetGPWaitsForReaders(t *testing.T) { runGPScenarios(t, false) }

// Call runs its function only after a grace period, and Barrier waits for
// it.
func TestDetCallAfterGP(t *testing.T) { runGPScenarios(t, true) }

// runGPScenarios runs runGPScenario for every flavour of detFlavours, in a
// subtest each, under detGPSeeds seeds.
func runGPScenarios(t *testing.T, call bool) {
	for _, fl := range detFlavours {
		t.Run(fl.name, func(t *testing.T) {
			for seed := range uint64(detGPSeeds) {
				runGPScenario(t, fl.name, fl.make, fl.sleepable, call, seed)
			}
		})
	}
}

// The check catches a grace period that does not wait: a flavour whose
// Synchronize returns at once fails some seed.
func TestDetGPCheckCatchesNoWait(t *testing.T) {
	caught := false
	for seed := range uint64(detGPSeeds) {
		st := &gpState{}
		sys := sched.New(sched.Config{CPUs: 2, Deterministic: true, Seed: seed, Check: st.check})
		f := NewSRCU(sys)
		sys.SpawnNamed("reader", 0, 0, func(th *sched.Thread) {
			idx := f.ReadLock(th)
			if !st.waiting {
				st.inside++
				defer func() { st.inside-- }()
			}
			detHold(th, true, 1)
			f.ReadUnlock(th, idx)
		})
		sys.SpawnNamed("updater", 1, 0, func(th *sched.Thread) {
			th.Yield()
			st.waiting = true
			sched.At("synchronize (broken)", "")
			st.ended = true
		})
		_, err := sys.Run()
		if errors.Is(err, sched.ErrCheck) {
			caught = true
			break
		}
	}
	if !caught {
		t.Error("no seed caught a grace period that does not wait")
	}
}

// Two Tasks Trace domains share each thread's nesting: grace periods of
// both wait for a reader of one.
func TestDetTasksTraceTwoDomains(t *testing.T) {
	for seed := range uint64(detGPSeeds) {
		st := &gpState{}
		sys := sched.New(sched.Config{CPUs: 2, Deterministic: true, Seed: seed, Check: st.check})
		tt1, tt2 := NewTasksTrace(sys), NewTasksTrace(sys)
		sys.SpawnNamed("reader", 0, 0, func(th *sched.Thread) {
			tt1.ReadLock(th)
			if !st.waiting {
				st.inside++
			}
			detHold(th, true, 0)
			if st.inside > 0 {
				st.inside--
			}
			tt1.ReadUnlock(th, 0)
		})
		done := 0
		for i, tt := range []*TasksTrace{tt1, tt2} {
			sys.SpawnNamed(fmt.Sprintf("updater%d", i), 1, 0, func(th *sched.Thread) {
				st.waiting = true
				th.Block(tt.Synchronize)
				if done++; done == 2 {
					st.ended = true
				}
			})
		}
		if rec, err := sys.Run(); err != nil || !st.ended {
			t.Fatalf("seed %d: %v\n%v", seed, err, rec)
		}
	}
}
