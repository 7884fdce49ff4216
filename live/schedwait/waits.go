// Package schedwait is the live side of experiment schedwait: a helper
// process whose two threads, pinned to one CPU, run the workload (a nice-0
// spinner and a nice-15 sleeper), traced in a private ftrace instance
// (sched:sched_wakeup of the two, every sched:sched_switch of the CPU);
// the nice-15 task's wait is from each sched_wakeup to the sched_switch
// that runs it.
package schedwait

import (
	"strconv"
	"strings"
	"time"

	"mmlab/experiment/schedwait"
	"mmlab/live/tracefs"
)

// Trace is what Waits reads a trace for: the two threads, their CPU, and
// the window of the workload in trace-clock ns.
type Trace struct {
	Hog, Nice15 int
	CPU         int
	From, To    int64
}

// field returns the value of "name=" in a tracepoint's printed args.
func field(args, name string) string {
	i := strings.Index(args, name+"=")
	if i < 0 || i > 0 && args[i-1] != ' ' {
		return ""
	}
	v := args[i+len(name)+1:]
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v
}

func intField(args, name string) int {
	n, err := strconv.Atoi(field(args, name))
	if err != nil {
		return -1
	}
	return n
}

// needResched reports whether an event's irq-info flags show
// TIF_NEED_RESCHED or TIF_NEED_RESCHED_LAZY set (trace_print_lat_fmt's
// second character: N, n, B, b, L or l; "p" alone is the preempt count's
// folded bit, '.' none).
func needResched(flags string) bool {
	return len(flags) >= 2 && strings.IndexByte("NnBbLl", flags[1]) >= 0
}

// Waits returns the nice-15 task's wake-ups in tr's window from the
// events, in time order: each sched_wakeup of it, after its first run in
// the window (the run the workload starts with), paired with the next
// sched_switch on the CPU that runs it. It ran at once when its wake-up
// found the CPU idle, or set need-resched there (the event runs on that CPU
// after check_preempt_wakeup_fair, which decided to preempt: ttwu_do_activate
// calls wakeup_preempt before ttwu_do_wakeup's trace_sched_wakeup), and it was
// the next task switched in; it preempted the nice-0 task when that was
// the task it found running. Otherwise the switch that ran it says what
// ended the wait: the nice-0 task preempted (prev_state R), or asleep (it
// switched out asleep, to the wakee or to idle), or another task. Others: a task other than the two and idle
// ran on the CPU during the wait. A wake-up whose run falls after the
// window's end is left out.
//
// Every event names the task current on its CPU, so an event of the CPU
// whose task is not the one the last sched_switch switched in shows a
// switch the trace lacks (a 6.18.44 KVM guest traces no switch out of
// the idle task on one of its two CPUs, so no wake-up that finds that CPU
// idle can be paired with its run). Waits counts those switches (missed),
// takes the event's task as current, and leaves out a wake-up whose run
// began in one (leftOut: its start is not in the trace).
func Waits(evs []tracefs.Event, tr Trace) (ws []schedwait.Wake, missed, leftOut int) {
	started := false
	curr := -1 // the CPU's current task by its last sched_switch; -1 unknown
	type pending struct {
		at            int64
		idle, resched bool
		onHog, others bool
		switches      int
	}
	var p *pending
	for _, e := range evs {
		if e.CPU == tr.CPU && curr >= 0 && e.TID != curr {
			missed++
			curr = e.TID
			if p != nil && curr == tr.Nice15 {
				p = nil // it runs, since a time the trace does not say
				leftOut++
			}
		}
		switch e.Name {
		case "sched_wakeup":
			if intField(e.Args, "pid") != tr.Nice15 || e.TimeNS < tr.From || e.TimeNS > tr.To || !started {
				continue
			}
			p = &pending{at: e.TimeNS, idle: curr == 0, resched: e.CPU == tr.CPU && needResched(e.Flags), onHog: curr == tr.Hog,
				others: curr != 0 && curr != tr.Hog && curr != tr.Nice15}
		case "sched_switch":
			if e.CPU != tr.CPU {
				continue
			}
			next := intField(e.Args, "next_pid")
			curr = next
			if next == tr.Nice15 && e.TimeNS >= tr.From {
				started = true
			}
			if p == nil {
				continue
			}
			if next != tr.Nice15 {
				p.switches++
				if next != 0 && next != tr.Hog {
					p.others = true
				}
				continue
			}
			if e.TimeNS > tr.To {
				p = nil
				continue
			}
			w := schedwait.Wake{Wait: time.Duration(e.TimeNS - p.at), Others: p.others}
			w.AtOnce = p.switches == 0 && (p.idle || p.resched)
			w.Preempt = w.AtOnce && p.onHog
			if !w.AtOnce {
				prev := intField(e.Args, "prev_pid")
				switch state := field(e.Args, "prev_state"); {
				case prev == tr.Hog && strings.HasPrefix(state, "R"):
					w.After = schedwait.AfterPreempt
				case prev == tr.Hog || prev == 0 && !p.others:
					w.After = schedwait.AfterSleep // the hog slept, the CPU idled
				default:
					w.After = schedwait.AfterOther
				}
			}
			ws = append(ws, w)
			p = nil
		}
	}
	return ws, missed, leftOut
}
