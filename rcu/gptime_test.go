package rcu

import (
	"sync"
	"testing"
	"time"

	"mmlab/sched"
)

// virtualClock is a Clock whose Sleep advances its time instead of
// waiting.
type virtualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *virtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *virtualClock) Sleep(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// elapsed runs f and returns the virtual time it took.
func (c *virtualClock) elapsed(f func()) time.Duration {
	t0 := c.Now()
	f()
	return c.Now().Sub(t0)
}

func newTiming() (Timing, *virtualClock) {
	c := &virtualClock{now: time.Unix(1000, 0)} // on a jiffy boundary
	return Timing{HZ: 250, Clock: c}, c
}

const jiffy = 4 * time.Millisecond // at HZ=250

// A normal grace period with every CPU idle ends at the first
// force-quiescent-state scan, one jiffy after it starts.
func TestClassicTimed(t *testing.T) {
	tm, c := newTiming()
	sys := sched.NewSystem(2)
	defer sys.Stop()
	cl := NewClassicAt(sys, tm)
	if d := c.elapsed(cl.Synchronize); d != jiffy {
		t.Errorf("idle normal grace period: %v, want %v", d, jiffy)
	}
}

// A Tasks Trace grace period with no reader: a normal grace period
// (rcu_tasks_trace_postscan), then the holdout loop's two scans, after one
// jiffy (init_fract) and two (fract++): the CPUs' current tasks are IPIed
// at the first and answer by the second. The next grace period starts only
// after the kthread's gp_sleep of one jiffy.
func TestTasksTraceTimed(t *testing.T) {
	tm, c := newTiming()
	sys := sched.NewSystem(1)
	defer sys.Stop()
	tt := NewTasksTraceAt(sys, tm)
	if d := c.elapsed(tt.Synchronize); d != 4*jiffy {
		t.Errorf("first grace period: %v, want %v", d, 4*jiffy)
	}
	if d := c.elapsed(tt.Synchronize); d != 5*jiffy {
		t.Errorf("back-to-back grace period: %v, want %v", d, 5*jiffy)
	}
	c.Sleep(time.Second)
	if d := c.elapsed(tt.Synchronize); d != 4*jiffy {
		t.Errorf("grace period after a pause: %v, want %v", d, 4*jiffy)
	}
}

// SRCU expedites a grace period when the domain is idle: with no reader it
// costs nothing beyond its scans; one requested within exp_holdoff of the
// last is a normal one, queued a jiffy later (srcu_get_delay()).
func TestSRCUTimed(t *testing.T) {
	tm, c := newTiming()
	sys := sched.NewSystem(1)
	defer sys.Stop()
	s := NewSRCUAt(sys, tm)
	if d := c.elapsed(s.Synchronize); d != 0 {
		t.Errorf("idle (expedited) grace period: %v, want 0", d)
	}
	if d := c.elapsed(s.Synchronize); d != jiffy {
		t.Errorf("grace period within exp_holdoff: %v, want %v", d, jiffy)
	}
	c.Sleep(time.Millisecond)
	if d := c.elapsed(s.Synchronize); d != 0 {
		t.Errorf("grace period after exp_holdoff: %v, want 0", d)
	}
}

// A reader holds a timed SRCU grace period up: it ends only after the
// reader left, the grace period polling with the kernel's delays.
func TestSRCUTimedWaitsForReader(t *testing.T) {
	tm, _ := newTiming()
	sys := sched.NewSystem(1)
	defer sys.Stop()
	s := NewSRCUAt(sys, tm)
	s.sda[0].locks[0].Add(1) // a reader in slot 0, as __srcu_read_lock() counts it
	waiting := make(chan struct{})
	s.SetWaitHook(func() { close(waiting) })
	done := make(chan struct{})
	go func() { s.Synchronize(); close(done) }()
	<-waiting
	select {
	case <-done:
		t.Fatal("grace period ended with a reader inside")
	default:
	}
	s.sda[0].unlocks[0].Add(1) // the reader leaves
	<-done
	if s.Stats().Waits == 0 {
		t.Error("no wait counted")
	}
}
