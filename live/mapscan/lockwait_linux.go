package mapscan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"mmlab/experiment/mapscan"
	"mmlab/live/tracefs"
	"mmlab/uapi"
)

// The lock tracepoints read: lock:contention_begin and lock:contention_end
// bracket a task's sleep on a lock, which is what the model's wait
// accounting counts. Of the begins only the rw_semaphores' are kept (flags
// READ or WRITE; a spinlock's are SPIN, a mutex's MUTEX), each with its
// kernel stack (a stacktrace trigger), which names the function that took
// the lock. The mmap_lock tracepoints (mmap_lock_start_locking,
// mmap_lock_acquire_returned) name the mm but fire on every acquisition,
// contended or not: they would count each call's lock taking as a wait and
// record several events per call, where the contention events come only
// with the sleeps, tens in a run.
//
// What these tracepoints cannot show, so that the figures leave it out:
//   - a writer's optimistic spinning on the owner before it sleeps
//     (kernel/locking/rwsem.c:rwsem_down_write_slowpath calls
//     rwsem_optimistic_spin before trace_contention_begin);
//   - per-VMA lock waits: __vma_start_write (mm/mmap_lock.c) waits for the
//     VMA's readers in __vma_enter_locked through rcuwait_wait_event, with
//     no lock tracepoint, and vma_start_read only tries, so a VMA-lock wait
//     of the mapper is not attributed;
//   - who held the lock: the tracepoints name only the waiters (but the
//     task that released an rw_semaphore wakes its sleepers: see below);
//   - the mapper's time runnable but off its CPU (preempted).
//
// How the mapper's sleeps ended comes from its sched_waking by a task,
// filtered to few (wakingFilter: not by a timer on an idle CPU, which wakes
// it from each of its nanosleeps). It fires in the waker's context
// (try_to_wake_up(); rwsem_wake() runs in the releaser's up_read() or
// up_write()), where sched_wakeup of a wake-up queued to an idle CPU fires
// on that CPU, in its idle task (ttwu_queue_wakelist()). A lock sleep's
// contention_end is the sleeper's own, once it runs again
// (rwsem_down_read_slowpath, rwsem_down_write_slowpath), so the time from
// its last wake-up to that end is its wait for its CPU.
const (
	lockBegin   = "lock/contention_begin"
	lockEnd     = "lock/contention_end"
	rwsemFlags  = "flags & 6" // LCB_F_READ | LCB_F_WRITE (include/trace/events/lock.h)
	schedWaking = "sched/sched_waking"
)

// wakingFilter keeps the wake-ups of thread tid (the mapper) by a task.
func wakingFilter(tid int) string { return fmt.Sprintf("pid == %d && common_pid != 0", tid) }

// mmapLockCallers are the kernel functions through which the mapper and
// the scanners take the mapper's mmap_lock (the mmap_*_lock helpers of
// include/linux/mmap_lock.h are inline, so the caller of down_write_killable
// or down_read is the frame above it): mmap's and munmap's
// mmap_write_lock_killable (mm/util.c:vm_mmap_pgoff, mm/vma.c:__vm_munmap),
// MAP_POPULATE's mmap_read_lock (mm/gup.c:__mm_populate), and the per-VMA
// maps walk's fallback mmap_read_lock_killable (mm/mmap_lock.c:lock_next_vma).
var mmapLockCallers = []string{"vm_mmap_pgoff", "__vm_munmap", "__mm_populate", "lock_next_vma"}

// lockWait is one sleep of a task on an rw_semaphore, from its
// lock:contention_begin to its lock:contention_end.
type lockWait struct {
	tid        int
	comm       string // the task's command name
	addr       string // the lock's address as the trace prints it (hashed with hash-ptr, stable for the boot)
	caller     string // the function that took the lock ("" without a stack)
	begin, end int64  // trace clock ns; end -1 if the trace ended first
}

// lockWaits pairs each task's rw_semaphore contention_begin with its next
// contention_end on the same address, and with the stack that follows the
// begin; other locks' ends are dropped.
func lockWaits(evs []tracefs.Event) ([]lockWait, error) {
	type key struct {
		tid  int
		addr string
	}
	var ws []lockWait
	open := map[key]int{}
	stackless := map[int]int{} // by tid: its last begin, until its stack comes
	for _, e := range evs {
		addr, rest, _ := strings.Cut(e.Args, " ")
		k := key{e.TID, addr}
		switch e.Name {
		case "contention_begin":
			if rest != "(flags=READ)" && rest != "(flags=WRITE)" {
				continue // not an rw_semaphore (the filter leaves none)
			}
			if _, ok := open[k]; !ok {
				open[k] = len(ws)
				stackless[e.TID] = len(ws)
				ws = append(ws, lockWait{tid: e.TID, comm: e.Comm, addr: addr, begin: e.TimeNS, end: -1})
			}
		case tracefs.StackTrace:
			if i, ok := stackless[e.TID]; ok {
				ws[i].caller = lockCaller(e.Stack)
				delete(stackless, e.TID)
			}
		case "contention_end":
			if i, ok := open[k]; ok {
				ws[i].end = e.TimeNS
				delete(open, k)
				delete(stackless, e.TID)
			}
		case "sched_waking": // wakings'
		default:
			return nil, fmt.Errorf("mapscan: unexpected trace event %q", e.Name)
		}
	}
	return ws, nil
}

// waking is a thread's wake-up by a task (the events wakingFilter keeps).
type waking struct {
	tid int    // the thread woken
	by  string // the waker's command name
	at  int64  // trace clock ns
}

// wakings returns the wake-ups among evs, in order.
func wakings(evs []tracefs.Event) []waking {
	var ws []waking
	for _, e := range evs {
		if e.Name != "sched_waking" {
			continue
		}
		if tid, ok := field(e.Args, " pid="); ok { // comm=COMM pid=PID prio=P target_cpu=CPU
			ws = append(ws, waking{tid: tid, by: e.Comm, at: e.TimeNS})
		}
	}
	return ws
}

// field returns the number after the last key in args (" pid=" in
// "comm=a pid=1 ...": a comm may itself contain the key).
func field(args, key string) (int, bool) {
	i := strings.LastIndex(args, key)
	if i < 0 {
		return 0, false
	}
	v, _, _ := strings.Cut(args[i+len(key):], " ")
	n, err := strconv.Atoi(v)
	return n, err == nil
}

// wake returns how w, a sleep of thread w.tid, ended: its last wake-up by
// a task within it, and the wait from there to its end; nil if the trace
// saw no such wake-up.
func (w lockWait) wake(ks []waking) *mapscan.Wake {
	var r *mapscan.Wake
	for _, k := range ks {
		if k.tid == w.tid && w.end >= 0 && k.at >= w.begin && k.at <= w.end {
			r = &mapscan.Wake{By: k.by, RunWaitUS: float64(w.end-k.at) / 1e3}
		}
	}
	return r
}

// lockCaller returns the function that called the rw_semaphore's down_*
// in a contention_begin's stack (innermost frame first: the tracepoint,
// rwsem_down_*_slowpath, down_*, its caller), without a compiler suffix
// (".isra.0"); "" if the stack does not show it.
func lockCaller(stack []string) string {
	for i, f := range stack {
		if strings.HasPrefix(f, "rwsem_down_") {
			for _, g := range stack[i+1:] {
				if !strings.HasPrefix(g, "down_") && !strings.HasPrefix(g, "__down_") {
					name, _, _ := strings.Cut(g, ".")
					return name
				}
			}
		}
	}
	return ""
}

// lockSpan is what a run's lock figures are taken within: the mapper's and
// the scanners' threads, and the CLOCK_MONOTONIC times (ns) of the timed
// calls and of the slowest one, which the mapper reports.
type lockSpan struct {
	Mapper           int   // the mapper's thread id
	Scanners         []int `json:"-"` // the scanners' (the parent knows them); their cats count as theirs (scanner)
	From, To         int64 // the first call's start, the last call's end
	SlowFrom, SlowTo int64 // the slowest call's start and end
}

// overlap is the part of w inside [from, to] in ns; a wait the trace did
// not see end lasts until to.
func (w lockWait) overlap(from, to int64) int64 {
	end := w.end
	if end < 0 {
		end = to
	}
	return max(0, min(end, to)-max(w.begin, from))
}

// in reports whether w was under way at some time of [from, to].
func (w lockWait) in(from, to int64) bool {
	return w.begin <= to && (w.end < 0 || w.end >= from)
}

// mmapLock returns the address of the mapper's mmap_lock: that of the
// mapper's or the scanners' sleeps taken through mmapLockCallers (the
// most of them, should the callers name two); "" if none slept so.
func (s lockSpan) mmapLock(ws []lockWait) string {
	n := map[string]int{}
	best := ""
	for _, w := range ws {
		if (w.tid == s.Mapper || s.scanner(w)) && slices.Contains(mmapLockCallers, w.caller) {
			n[w.addr]++
			if best == "" || n[w.addr] > n[best] || n[w.addr] == n[best] && w.addr < best {
				best = w.addr
			}
		}
	}
	return best
}

// scanner reports whether w is a scanner's: of a scanner's thread, or of a
// cat a text scanner ran for a pass (the trace follows the scanners'
// children: event-fork).
func (s lockSpan) scanner(w lockWait) bool {
	return w.tid != s.Mapper && (slices.Contains(s.Scanners, w.tid) || w.comm == "cat")
}

// otherLock names an rw_semaphore other than the mmap_lock by the function
// that took it ("rw_semaphore in vma_prepare": the anon_vma's lock, for
// this anonymous region).
func otherLock(w lockWait) string {
	if w.caller == "" {
		return "rw_semaphore (no stack)"
	}
	return "rw_semaphore in " + w.caller
}

// figures sets st's lock figures from the waits, as the model's wait
// accounting does, within the timed calls [s.From, s.To]:
// LockWaitMeanUS is the mapper's time asleep on its mmap_lock per call;
// LockWaitMaxUS its longest single sleep there (one call may sleep twice:
// MAP_POPULATE's mmap_read_lock after mmap's write lock); MaxOpWaitUS the
// slowest call's time asleep on the mmap_lock and on each other
// rw_semaphore (by otherLock), and SlowestWake how the longest of those
// ended (from ks); ScannersSlept the scanners' sleeps on the mapper's
// mmap_lock.
func (s lockSpan) figures(ws []lockWait, ks []waking, st *mapscan.Stats) {
	if st.Ops == 0 {
		return // no call timed: no window
	}
	lock := s.mmapLock(ws)
	var sum, longest int64
	slow := map[string]int64{}
	var slept mapscan.HeldStat
	var slowest lockWait // the slowest call's longest sleep
	for _, w := range ws {
		if !w.in(s.From, s.To) {
			continue
		}
		d := w.overlap(s.From, s.To)
		if w.tid == s.Mapper && w.overlap(s.SlowFrom, s.SlowTo) > slowest.overlap(s.SlowFrom, s.SlowTo) {
			slowest = w
		}
		switch {
		case w.tid == s.Mapper && w.addr == lock:
			sum += d
			longest = max(longest, d)
			slow[uapi.MmapLockName] += w.overlap(s.SlowFrom, s.SlowTo)
		case w.tid == s.Mapper:
			slow[otherLock(w)] += w.overlap(s.SlowFrom, s.SlowTo)
		case s.scanner(w) && w.addr == lock:
			slept.Count++
			slept.MaxUS = max(slept.MaxUS, float64(d)/1e3)
		}
	}
	st.LockWaitMeanUS = float64(sum) / 1e3 / float64(st.Ops)
	st.LockWaitMaxUS = float64(longest) / 1e3
	st.MaxOpWaitUS, st.ScannersSlept, st.SlowestWake = nil, nil, nil
	if slowest.tid != 0 {
		st.SlowestWake = slowest.wake(ks)
	}
	for name, d := range slow {
		if d > 0 {
			if st.MaxOpWaitUS == nil {
				st.MaxOpWaitUS = map[string]float64{}
			}
			st.MaxOpWaitUS[name] = float64(d) / 1e3
		}
	}
	if slept.Count > 0 {
		st.ScannersSlept = mapscan.Held{uapi.MmapLockName: slept}
	}
}
