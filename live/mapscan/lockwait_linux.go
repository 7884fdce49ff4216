package mapscan

import (
	"fmt"
	"strings"

	"mmlab/experiment/mapscan"
	"mmlab/live/tracefs"
)

// The lock tracepoints read, and the filter that keeps of their begins only
// the rw_semaphores' (flags READ or WRITE; a spinlock's are SPIN, a
// mutex's MUTEX): lock:contention_begin and lock:contention_end bracket a
// task's sleep on a lock, which is what the model's wait accounting
// counts. The mmap_lock tracepoints (mmap_lock_start_locking,
// mmap_lock_acquire_returned) name the mm but fire on every acquisition,
// contended or not, so they would count each call's lock taking as a wait
// and record several events per call.
//
// What these tracepoints cannot show, so that the figures leave it out:
//   - a writer's optimistic spinning on the owner before it sleeps
//     (kernel/locking/rwsem.c:rwsem_down_write_slowpath calls
//     rwsem_optimistic_spin before trace_contention_begin);
//   - per-VMA lock waits: __vma_start_write (mm/mmap_lock.c) waits for the
//     VMA's readers in __vma_enter_locked through rcuwait_wait_event, with
//     no lock tracepoint, and vma_start_read only tries, so a VMA-lock wait
//     of the mapper is not attributed;
//   - the mapper's time runnable but off its CPU (preempted).
var (
	lockEvents = []string{"lock/contention_begin", "lock/contention_end"}
	lockFilter = map[string]string{"lock/contention_begin": "flags & 6"} // LCB_F_READ | LCB_F_WRITE
)

// mmapLockName is the model's name of the mm's mmap_lock.
const mmapLockName = "mmap_lock"

// lockWait is one sleep of a task on an rw_semaphore, from its
// lock:contention_begin to its lock:contention_end.
type lockWait struct {
	tid        int
	addr       string // the lock's address as the trace prints it (hashed with hash-ptr, stable for the boot)
	write      bool
	begin, end int64 // trace clock ns; end -1 if the trace ended first
}

// lockWaits pairs each task's rw_semaphore contention_begin with its next
// contention_end on the same address; other locks' ends are dropped.
func lockWaits(evs []tracefs.Event) ([]lockWait, error) {
	type key struct {
		tid  int
		addr string
	}
	var ws []lockWait
	open := map[key]int{}
	for _, e := range evs {
		addr, rest, _ := strings.Cut(e.Args, " ")
		k := key{e.TID, addr}
		switch e.Name {
		case "contention_begin":
			var write bool
			switch rest {
			case "(flags=READ)":
			case "(flags=WRITE)":
				write = true
			default:
				continue // not an rw_semaphore (the filter leaves none)
			}
			if _, ok := open[k]; !ok {
				open[k] = len(ws)
				ws = append(ws, lockWait{tid: e.TID, addr: addr, write: write, begin: e.TimeNS, end: -1})
			}
		case "contention_end":
			if i, ok := open[k]; ok {
				ws[i].end = e.TimeNS
				delete(open, k)
			}
		default:
			return nil, fmt.Errorf("mapscan: unexpected trace event %q", e.Name)
		}
	}
	return ws, nil
}

// lockSpan is what the mapper reports of a run for its lock figures: its
// thread, and the CLOCK_MONOTONIC times (ns) of the timed calls and of the
// slowest one. The trace holds only the mapper's and the scanners' threads.
type lockSpan struct {
	Mapper           int   // the mapper's thread id
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

// mmapLock returns the address of the mapper's mmap_lock: the lock the
// mapper waited on for write most often (its mmap and munmap take the
// mmap_lock for write; the only other rw_semaphore it write-locks, its
// anon_vma's, is contended only by the kernel's rmap walks), else, if the
// mapper never waited for write, the lock the scanners waited on most
// often (the maps walk's fallback mmap_read_lock_killable of the mapper's
// mm). "" if no one waited. A heuristic: the trace prints no mm.
func (s lockSpan) mmapLock(ws []lockWait) string {
	pick := func(of func(lockWait) bool) string {
		n := map[string]int{}
		best := ""
		for _, w := range ws {
			if of(w) && w.in(s.From, s.To) {
				n[w.addr]++
				if best == "" || n[w.addr] > n[best] || n[w.addr] == n[best] && w.addr < best {
					best = w.addr
				}
			}
		}
		return best
	}
	if a := pick(func(w lockWait) bool { return w.tid == s.Mapper && w.write }); a != "" {
		return a
	}
	return pick(func(w lockWait) bool { return w.tid != s.Mapper })
}

// figures sets st's lock figures from the waits, as the model's wait
// accounting does, within the timed calls [s.From, s.To]:
// LockWaitMeanUS is the mapper's time asleep on its mmap_lock per call;
// LockWaitMaxUS its longest single sleep there (one call may sleep twice:
// MAP_POPULATE's mmap_read_lock after mmap's write lock); MaxOpWaitUS the
// slowest call's time asleep on the mmap_lock, and on other
// rw_semaphores; ScannersSlept the scanners' sleeps on the mapper's
// mmap_lock.
func (s lockSpan) figures(ws []lockWait, st *mapscan.Stats) {
	if st.Ops == 0 {
		return // no call timed: no window
	}
	lock := s.mmapLock(ws)
	var sum, longest, slowLock, slowOther int64
	var slept mapscan.HeldStat
	for _, w := range ws {
		if !w.in(s.From, s.To) {
			continue
		}
		d := w.overlap(s.From, s.To)
		switch {
		case w.tid == s.Mapper && w.addr == lock:
			sum += d
			longest = max(longest, d)
			slowLock += w.overlap(s.SlowFrom, s.SlowTo)
		case w.tid == s.Mapper:
			slowOther += w.overlap(s.SlowFrom, s.SlowTo)
		case w.addr == lock:
			slept.Count++
			slept.MaxUS = max(slept.MaxUS, float64(d)/1e3)
		}
	}
	st.LockWaitMeanUS = float64(sum) / 1e3 / float64(st.Ops)
	st.LockWaitMaxUS = float64(longest) / 1e3
	st.MaxOpWaitUS, st.ScannersSlept = nil, nil
	if slowLock > 0 {
		st.MaxOpWaitUS = map[string]float64{mmapLockName: float64(slowLock) / 1e3}
	}
	if slowOther > 0 {
		if st.MaxOpWaitUS == nil {
			st.MaxOpWaitUS = map[string]float64{}
		}
		st.MaxOpWaitUS["other rw_semaphores"] = float64(slowOther) / 1e3
	}
	if slept.Count > 0 {
		st.ScannersSlept = mapscan.Held{mmapLockName: slept}
	}
}
