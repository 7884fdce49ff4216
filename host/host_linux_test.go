package host

import (
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// onThread runs fn on a goroutine locked to an OS thread of its own, which
// ends with it, and with the thread whatever fn changed.
func onThread(fn func()) {
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer close(done)
		fn()
	}()
	<-done
}

// Pin binds the thread to the CPUs it names, CPUs reads them back, and
// pinning to the old set restores it.
func TestPinAndCPUs(t *testing.T) {
	onThread(func() {
		old, err := CPUs()
		if err != nil || len(old) == 0 || !slices.IsSorted(old) {
			t.Errorf("CPUs() = %v, %v; want the affinity mask, in order", old, err)
			return
		}
		last := old[len(old)-1]
		if err := Pin(last); err != nil {
			t.Errorf("Pin(%d): %v", last, err)
			return
		}
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil || set.Count() != 1 || !set.IsSet(last) {
			t.Errorf("after Pin(%d) sched_getaffinity gives %d CPUs (%v), want only %d", last, set.Count(), err, last)
		}
		if err := Pin(old...); err != nil {
			t.Errorf("Pin(%v): %v", old, err)
		}
		if back, err := CPUs(); err != nil || !slices.Equal(back, old) {
			t.Errorf("after Pin(%v) CPUs() = %v, %v", old, back, err)
		}
	})
	if err := Pin(); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Pin() of no CPU: %v, want EINVAL", err)
	}
}

// SetFIFO and SetNice give the thread the policy sched_getattr reads back.
func TestSetFIFOAndNice(t *testing.T) {
	type attr struct {
		policy   uint32
		nice     int32
		priority uint32
	}
	var nice, fifo attr
	var niceErr, fifoErr error
	read := func() attr {
		a, err := unix.SchedGetAttr(0, 0)
		if err != nil {
			t.Errorf("sched_getattr: %v", err)
			return attr{}
		}
		return attr{a.Policy, a.Nice, a.Priority}
	}
	onThread(func() {
		if niceErr = SetNice(15); niceErr == nil {
			nice = read()
		}
		if fifoErr = SetFIFO(3); fifoErr == nil {
			fifo = read()
		}
	})
	if want := (attr{unix.SCHED_NORMAL, 15, 0}); niceErr != nil || nice != want {
		t.Errorf("SetNice(15): %v, thread has %+v, want %+v", niceErr, nice, want)
	}
	if errors.Is(fifoErr, unix.EPERM) {
		t.Skip("SCHED_FIFO needs CAP_SYS_NICE")
	}
	if want := (attr{unix.SCHED_FIFO, 0, 3}); fifoErr != nil || fifo != want {
		t.Errorf("SetFIFO(3): %v, thread has %+v, want %+v", fifoErr, fifo, want)
	}
	if err := SetFIFO(100); !errors.Is(err, unix.EINVAL) {
		t.Errorf("SetFIFO(100): %v, want EINVAL", err)
	}
}

// The thread's clocks read on Linux: its CPU time does not go back, and
// its run delay reads until closed.
func TestClocks(t *testing.T) {
	onThread(func() {
		t0, ok0 := ThreadCPUTime()
		t1, ok1 := ThreadCPUTime()
		if !ok0 || !ok1 || t1 < t0 {
			t.Errorf("ThreadCPUTime: %v %v then %v %v", t0, ok0, t1, ok1)
		}
		c, err := OpenRunDelay()
		if err != nil {
			t.Skipf("no run_delay here: %v", err)
		}
		if d, ok := c.Read(); !ok || d < 0 {
			t.Errorf("RunDelay.Read() = %v, %v", d, ok)
		}
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	var none *RunDelay
	if _, ok := none.Read(); ok || none.Close() != nil {
		t.Error("a nil RunDelay reads or fails to close")
	}
}

// SetTimerSlack sets the thread's slack, which prctl(PR_GET_TIMERSLACK)
// reads back; 0 asks for the least, 1 ns.
func TestSetTimerSlack(t *testing.T) {
	var got [2]int
	var errs [2]error
	onThread(func() {
		for i, d := range []int{1000, 0} {
			errs[i] = SetTimerSlack(time.Duration(d))
			n, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
			if err != nil {
				t.Errorf("PR_GET_TIMERSLACK: %v", err)
			}
			got[i] = n
		}
	})
	if errs[0] != nil || errs[1] != nil || got != [2]int{1000, 1} {
		t.Errorf("SetTimerSlack(1µs), (0): %v, thread has %v ns; want 1000, 1", errs, got)
	}
}
