package sched

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mmlab/host"
)

// The IPI handler runs on the target thread between two of its Points: the
// handler and the thread share plain variables, which the race detector
// accepts only if every access is ordered, and the thread sees no step of its
// own between the handler's snapshot and its next instruction.
func TestIPIRunsOnTargetThread(t *testing.T) {
	s := NewSystem(2)
	defer s.Stop()
	started := make(chan struct{})
	var count, seen int
	var stop bool
	var running *Thread
	th := s.Spawn(1, 0, func(t *Thread) {
		close(started)
		for !stop {
			count++
			t.Point()
		}
	})
	<-started
	s.CPU(1).IPI(func(r *Thread) {
		running = r
		seen = count
		stop = true
	})
	<-th.Done()
	if running != th {
		t.Errorf("IPI handler saw running thread %v, want %v", running, th)
	}
	if count != seen {
		t.Errorf("thread ran %d steps after the handler's snapshot, want 0", count-seen)
	}
}

// An IPI to an idle CPU runs at once, on the caller, with no running thread.
func TestIPIIdleCPU(t *testing.T) {
	s := NewSystem(2)
	defer s.Stop()
	ran := false
	running := &Thread{}
	s.CPU(1).IPI(func(r *Thread) { ran, running = true, r })
	if !ran || running != nil {
		t.Errorf("idle IPI: ran=%v running=%v, want true and nil", ran, running)
	}
	// Once the CPU has a thread, the IPI goes to it.
	th := s.Spawn(1, 0, func(t *Thread) {
		for !t.Stopping() && running == nil {
			t.Point()
		}
	})
	s.CPU(1).IPI(func(r *Thread) { running = r })
	<-th.Done()
	if running != th {
		t.Errorf("IPI after spawn ran with %v, want %v", running, th)
	}
}

// runOrder starts low on a one-CPU system, makes other runnable while low
// holds the CPU, then lets low run step; it returns the order of events.
// The log is a plain slice shared by the threads of the CPU: only one runs at
// a time, so the race detector accepts it.
func runOrder(t *testing.T, lowPrio, otherPrio int, step func(*Thread, func(string))) []string {
	log, _ := runOrderSwitches(t, lowPrio, otherPrio, step)
	return log
}

// runOrderSwitches is runOrder that also returns low's context switches.
func runOrderSwitches(t *testing.T, lowPrio, otherPrio int, step func(*Thread, func(string))) (log []string, switches [2]uint64) {
	t.Helper()
	s := NewSystem(1)
	defer s.Stop()
	add := func(e string) { log = append(log, e) }
	ready, queued := make(chan struct{}), make(chan struct{})
	low := s.Spawn(0, lowPrio, func(t *Thread) {
		add("low start")
		close(ready)
		<-queued // still holding the CPU
		step(t, add)
		add("low end")
	})
	<-ready
	other := s.Spawn(0, otherPrio, func(t *Thread) { add("other") })
	close(queued)
	<-low.Done()
	<-other.Done()
	switches[0], switches[1] = low.Switches()
	return log, switches
}

func TestPreemptAtNextPoint(t *testing.T) {
	point := func(t *Thread, add func(string)) { add("point"); t.Point(); add("after point") }
	for _, tc := range []struct {
		name           string
		lowPrio, other int
		want           []string
	}{
		{"better prio preempts", 10, 0, []string{"low start", "point", "other", "after point", "low end"}},
		{"equal prio waits", 10, 10, []string{"low start", "point", "after point", "low end", "other"}},
		{"worse prio waits", 10, 20, []string{"low start", "point", "after point", "low end", "other"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runOrder(t, tc.lowPrio, tc.other, point); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// A preemption counts as involuntary, a Yield that switches as voluntary.
func TestSwitchCounts(t *testing.T) {
	point := func(t *Thread, add func(string)) { t.Point() }
	if _, sw := runOrderSwitches(t, 10, 0, point); sw != [2]uint64{0, 1} {
		t.Errorf("preempted thread: switches (voluntary, involuntary) = %v, want [0 1]", sw)
	}
	yield := func(t *Thread, add func(string)) { t.Yield() }
	if _, sw := runOrderSwitches(t, 10, 10, yield); sw != [2]uint64{1, 0} {
		t.Errorf("yielding thread: switches = %v, want [1 0]", sw)
	}
	if _, sw := runOrderSwitches(t, 10, 20, yield); sw != [2]uint64{0, 0} {
		t.Errorf("yield with nobody to yield to: switches = %v, want [0 0]", sw)
	}
}

func TestYieldToEqualPrio(t *testing.T) {
	yield := func(t *Thread, add func(string)) { add("yield"); t.Yield(); add("after yield") }
	want := []string{"low start", "yield", "other", "after yield", "low end"}
	if got := runOrder(t, 10, 10, yield); !slices.Equal(got, want) {
		t.Errorf("equal prio: got %q, want %q", got, want)
	}
	want = []string{"low start", "yield", "after yield", "low end", "other"}
	if got := runOrder(t, 10, 20, yield); !slices.Equal(got, want) {
		t.Errorf("worse prio: got %q, want %q", got, want)
	}
}

// SetPrio to a worse priority than a runnable thread yields at the next Point.
func TestSetPrioYields(t *testing.T) {
	step := func(t *Thread, add func(string)) { t.SetPrio(30); add("point"); t.Point(); add("after point") }
	want := []string{"low start", "point", "other", "after point", "low end"}
	if got := runOrder(t, 10, 20, step); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// A thread that blocks lets another thread of its CPU run, and gets the CPU
// back after its wait.
func TestBlockLetsOtherRun(t *testing.T) {
	s := NewSystem(1)
	defer s.Stop()
	phase := 0
	bDone := make(chan struct{})
	a := s.Spawn(0, 0, func(th *Thread) {
		phase = 1
		th.Block(func() { <-bDone })
		if phase != 2 {
			t.Errorf("a resumed in phase %d, want 2", phase)
		}
		phase = 3
	})
	b := s.Spawn(0, 0, func(th *Thread) {
		if phase != 1 {
			t.Errorf("b ran in phase %d, want 1 (a blocked)", phase)
		}
		phase = 2
		close(bDone)
	})
	<-a.Done()
	<-b.Done()
	if phase != 3 {
		t.Errorf("final phase %d, want 3", phase)
	}
}

// A better-priority thread whose wait ends preempts a spinning thread at a
// Point: the spinner loops until the woken thread has run, so the test ends
// only if the preemption happens.
func TestWakeupPreemptsSpinner(t *testing.T) {
	s := NewSystem(1)
	defer s.Stop()
	wake := make(chan struct{})
	hRan := false
	h := s.Spawn(0, 0, func(t *Thread) {
		t.Block(func() { <-wake })
		hRan = true
	})
	l := s.Spawn(0, 10, func(t *Thread) {
		close(wake) // h is blocked: l runs only once h gave up the CPU
		for !hRan {
			t.Point()
		}
	})
	<-h.Done()
	<-l.Done()
}

// CallFunc inspects a thread that is not running under the runqueue lock, and
// a running thread through an IPI on the thread itself.
func TestCallFunc(t *testing.T) {
	s := NewSystem(2)
	defer s.Stop()
	release := make(chan struct{})
	inBlock := make(chan struct{})
	state := 0 // plain: the thread's state
	var sawRunning []bool
	th := s.Spawn(0, 0, func(t *Thread) {
		state = 1
		t.Block(func() { close(inBlock); <-release })
		for state != 3 {
			t.Point()
		}
	})
	<-inBlock
	th.CallFunc(func(running bool) {
		sawRunning = append(sawRunning, running)
		if state == 1 {
			state = 2
		}
	})
	close(release)
	for {
		done := false
		th.CallFunc(func(running bool) {
			if running && state == 2 {
				sawRunning = append(sawRunning, running)
				state = 3
				done = true
			}
		})
		if done {
			break
		}
	}
	<-th.Done()
	if !slices.Equal(sawRunning, []bool{false, true}) {
		t.Errorf("CallFunc saw running=%v, want [false true]", sawRunning)
	}
}

// Only one thread runs on a model CPU at a time, whatever mix of Points,
// Yields, Blocks and IPIs: each CPU's counter is plain, and an occupancy
// count catches two threads inside at once.
func TestOneThreadPerCPU(t *testing.T) {
	const ncpu, perCPU, steps = 2, 3, 300
	s := NewSystem(ncpu)
	defer s.Stop()
	var counter [ncpu]int
	var inside [ncpu]atomic.Int32
	var overlaps atomic.Int32
	var ths []*Thread
	for c := range ncpu {
		for k := range perCPU {
			ths = append(ths, s.Spawn(c, k, func(t *Thread) {
				for i := range steps {
					if inside[c].Add(1) != 1 {
						overlaps.Add(1)
					}
					counter[c]++
					inside[c].Add(-1)
					switch i % 3 {
					case 0:
						t.Point()
					case 1:
						t.Yield()
					case 2:
						t.Block(func() {})
					}
				}
			}))
		}
	}
	var wg sync.WaitGroup
	ipis := 0
	for c := range ncpu {
		wg.Go(func() {
			for range steps {
				s.CPU(c).IPI(func(*Thread) { counter[c]++ })
			}
		})
		ipis += steps
	}
	wg.Wait()
	for _, th := range ths {
		<-th.Done()
	}
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d times two threads ran on one CPU", n)
	}
	for c := range ncpu {
		if want := perCPU*steps + ipis/ncpu; counter[c] != want {
			t.Errorf("cpu %d: counter %d, want %d", c, counter[c], want)
		}
	}
}

func TestThreadsRegistry(t *testing.T) {
	s := NewSystem(1)
	release := make(chan struct{})
	th := s.Spawn(0, 0, func(t *Thread) { t.Block(func() { <-release }) })
	if got := s.Threads(); len(got) != 1 || got[0] != th {
		t.Errorf("Threads() = %v, want [%v]", got, th)
	}
	close(release)
	s.Stop()
	if got := s.Threads(); len(got) != 0 {
		t.Errorf("Threads() after Stop = %v, want none", got)
	}
}

// BenchmarkPointIdle measures a Point with nothing to do; cpu-ns/op is the
// thread's CPU time per Point, unaffected by other load on the machine.
func BenchmarkPointIdle(b *testing.B) {
	s := NewSystem(1)
	defer s.Stop()
	n := b.N
	var cpu time.Duration
	var ok bool
	b.ResetTimer()
	th := s.Spawn(0, 0, func(t *Thread) {
		start, _ := host.ThreadCPUTime()
		for range n {
			t.Point()
		}
		end, ok1 := host.ThreadCPUTime()
		cpu, ok = end-start, ok1
	})
	<-th.Done()
	if ok {
		b.ReportMetric(float64(cpu)/float64(n), "cpu-ns/op")
	}
}

// BenchmarkIPI measures an IPI round trip to a thread spinning on Points on
// another CPU.
func BenchmarkIPI(b *testing.B) {
	s := New(Config{CPUs: 2, Host: host.Threads{}})
	th := s.Spawn(1, 0, func(t *Thread) {
		for !t.Stopping() {
			t.Point()
		}
	})
	for b.Loop() {
		s.CPU(1).IPI(func(*Thread) {})
	}
	s.Stop()
	<-th.Done()
}

// BenchmarkSwitch measures a Yield from one thread to another of the same
// CPU and back (two context switches per op).
func BenchmarkSwitch(b *testing.B) {
	s := NewSystem(1)
	defer s.Stop()
	n := b.N
	for range 2 {
		s.Spawn(0, 0, func(t *Thread) {
			for range n {
				t.Yield()
			}
		})
	}
}

// IPIFrom runs an IPI to the sender's own CPU at once on the sender, and lets
// two threads IPI each other's CPU without deadlock.
func TestIPIFrom(t *testing.T) {
	s := NewSystem(2)
	defer s.Stop()
	var self [2]*Thread
	var remote [2]*Thread
	var ran [2]bool // the other thread's IPI to this CPU ran
	var ths [2]*Thread
	start := make(chan struct{})
	for c := range 2 {
		ths[c] = s.Spawn(c, 0, func(th *Thread) {
			s.CPU(c).IPIFrom(th, func(r *Thread) { self[c] = r })
			<-start // both threads exist before they IPI each other
			s.CPU(1-c).IPIFrom(th, func(r *Thread) { remote[1-c], ran[1-c] = r, true })
			// Keep answering IPIs until the other thread's IPI ran here
			// (on this thread, or on the sender while this one blocked).
			for !ran[c] {
				th.Point()
			}
		})
	}
	close(start)
	for _, th := range ths {
		<-th.Done()
	}
	for c := range 2 {
		if self[c] != ths[c] {
			t.Errorf("cpu %d: self IPI ran with %v, want the sender %v", c, self[c], ths[c])
		}
		if remote[c] != ths[c] && remote[c] != nil {
			t.Errorf("cpu %d: remote IPI ran with %v, want %v or idle", c, remote[c], ths[c])
		}
	}
}

// Threads that switch back and forth must not starve goroutines outside the
// model: a goroutine a thread wakes must get to run while they go on.
func TestSwitchingDoesNotStarveGoroutines(t *testing.T) {
	s := NewSystem(2)
	defer s.Stop()
	tick := make(chan struct{})
	var stop atomic.Bool
	for c := range 2 {
		for k := range 2 {
			s.Spawn(c, 0, func(th *Thread) {
				for i := 0; !stop.Load(); i++ {
					if k == 0 && i%64 == 0 {
						select {
						case tick <- struct{}{}: // wakes the test goroutine
						default:
						}
					}
					th.Yield()
				}
			})
		}
	}
	for range 50 {
		<-tick
	}
	stop.Store(true)
}
