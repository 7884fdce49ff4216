package schedwait

import (
	"strings"
	"testing"
	"time"

	"mmlab/experiment/schedwait"
	"mmlab/live/tracefs"
)

// A trace of CPU 1 with the nice-0 task 10 and the nice-15 task 20: its
// first run (not counted), a wake-up that preempts the hog (need-resched
// set at the sched_wakeup), one on an idle CPU, one that waits for the hog
// to sleep, one during whose wait another task runs, and one whose run
// falls after the window.
const trace = `# tracer: nop
#
# entries-in-buffer/entries-written: 14/14   #P:2
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
          <idle>-0       [001] dNh2. 100.000000: sched_wakeup: comm=n15 pid=20 prio=135 target_cpu=001
          <idle>-0       [001] d..2. 100.000010: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=n15 next_pid=20 next_prio=135
             n15-20      [001] d..2. 100.000110: sched_switch: prev_comm=n15 prev_pid=20 prev_prio=135 prev_state=S ==> next_comm=hog next_pid=10 next_prio=120
             hog-10      [001] dNh1. 100.001000: sched_wakeup: comm=n15 pid=20 prio=135 target_cpu=001
             hog-10      [001] d..2. 100.001004: sched_switch: prev_comm=hog prev_pid=10 prev_prio=120 prev_state=R+ ==> next_comm=n15 next_pid=20 next_prio=135
             n15-20      [001] d..2. 100.001104: sched_switch: prev_comm=n15 prev_pid=20 prev_prio=135 prev_state=S ==> next_comm=hog next_pid=10 next_prio=120
             hog-10      [001] d..2. 100.002000: sched_switch: prev_comm=hog prev_pid=10 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
          <idle>-0       [001] dNh2. 100.002500: sched_wakeup: comm=n15 pid=20 prio=135 target_cpu=001
          <idle>-0       [001] d..2. 100.002503: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=n15 next_pid=20 next_prio=135
             n15-20      [001] d..2. 100.002603: sched_switch: prev_comm=n15 prev_pid=20 prev_prio=135 prev_state=S ==> next_comm=hog next_pid=10 next_prio=120
             hog-10      [001] d.h1. 100.003000: sched_wakeup: comm=n15 pid=20 prio=135 target_cpu=001
             hog-10      [001] d..2. 100.003500: sched_switch: prev_comm=hog prev_pid=10 prev_prio=120 prev_state=S ==> next_comm=n15 next_pid=20 next_prio=135
             n15-20      [001] d..2. 100.003600: sched_switch: prev_comm=n15 prev_pid=20 prev_prio=135 prev_state=S ==> next_comm=hog next_pid=10 next_prio=120
             hog-10      [001] d.h1. 100.004000: sched_wakeup: comm=n15 pid=20 prio=135 target_cpu=001
             hog-10      [001] d..2. 100.004200: sched_switch: prev_comm=hog prev_pid=10 prev_prio=120 prev_state=R ==> next_comm=kworker next_pid=99 next_prio=120
         kworker-99      [001] d..2. 100.004300: sched_switch: prev_comm=kworker prev_pid=99 prev_prio=120 prev_state=I ==> next_comm=n15 next_pid=20 next_prio=135
             n15-20      [001] d..2. 100.004400: sched_switch: prev_comm=n15 prev_pid=20 prev_prio=135 prev_state=S ==> next_comm=hog next_pid=10 next_prio=120
             hog-10      [001] d.h1. 100.004900: sched_wakeup: comm=n15 pid=20 prio=135 target_cpu=001
             hog-10      [001] d..2. 100.005100: sched_switch: prev_comm=hog prev_pid=10 prev_prio=120 prev_state=R ==> next_comm=n15 next_pid=20 next_prio=135
`

func TestWaits(t *testing.T) {
	evs, _, err := tracefs.Parse(strings.NewReader(trace))
	if err != nil {
		t.Fatal(err)
	}
	got, missed, leftOut := Waits(evs, Trace{Hog: 10, Nice15: 20, CPU: 1, From: 100e9, To: 100e9 + 5e6})
	if missed != 0 || leftOut != 0 {
		t.Errorf("%d switches missed, %d wake-ups left out in a trace that has them all", missed, leftOut)
	}
	us := time.Microsecond
	want := []schedwait.Wake{
		{Wait: 4 * us, AtOnce: true, Preempt: true},
		{Wait: 3 * us, AtOnce: true},
		{Wait: 500 * us, After: schedwait.AfterSleep},
		{Wait: 300 * us, Others: true, After: schedwait.AfterOther},
	}
	if len(got) != len(want) {
		t.Fatalf("wake-ups %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("wake-up %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if l := liveFigures(got); l.OthersShare != .25 || l.Clean != 3 || l.CleanP50US != 4 {
		t.Errorf("live figures %+v", l)
	}
}

// The trace above as a kernel that traces no switch out of the idle task
// gives it: the switch to the hog after the idle CPU's wake-up of it is
// missing, and so is the nice-15 task's run after a wake-up that found the
// CPU idle. The events' tasks show both: the wake-up during the hog's run
// is not taken for one that found the CPU idle, and the wake-up whose run
// is missing is left out.
const traceNoIdleSwitch = `# tracer: nop
             hog-10      [001] d..2. 100.000000: sched_switch: prev_comm=hog prev_pid=10 prev_prio=120 prev_state=S ==> next_comm=n15 next_pid=20 next_prio=135
             n15-20      [001] d..2. 100.000100: sched_switch: prev_comm=n15 prev_pid=20 prev_prio=135 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
          <idle>-0       [001] dNh2. 100.000500: sched_wakeup: comm=hog pid=10 prio=120 target_cpu=001
             hog-10      [001] d.h1. 100.001000: sched_wakeup: comm=n15 pid=20 prio=135 target_cpu=001
             hog-10      [001] d..2. 100.001400: sched_switch: prev_comm=hog prev_pid=10 prev_prio=120 prev_state=S ==> next_comm=n15 next_pid=20 next_prio=135
             n15-20      [001] d..2. 100.001500: sched_switch: prev_comm=n15 prev_pid=20 prev_prio=135 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
          <idle>-0       [001] dNh2. 100.002500: sched_wakeup: comm=n15 pid=20 prio=135 target_cpu=001
             n15-20      [001] d..2. 100.002600: sched_switch: prev_comm=n15 prev_pid=20 prev_prio=135 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
`

func TestWaitsMissedSwitches(t *testing.T) {
	evs, _, err := tracefs.Parse(strings.NewReader(traceNoIdleSwitch))
	if err != nil {
		t.Fatal(err)
	}
	got, missed, leftOut := Waits(evs, Trace{Hog: 10, Nice15: 20, CPU: 1, From: 100e9, To: 100e9 + 5e6})
	want := []schedwait.Wake{{Wait: 400 * time.Microsecond, After: schedwait.AfterSleep}}
	if missed != 2 || leftOut != 1 || len(got) != 1 || got[0] != want[0] {
		t.Errorf("wake-ups %+v, %d switches missed, %d left out; want %+v, 2, 1", got, missed, leftOut, want)
	}
}
