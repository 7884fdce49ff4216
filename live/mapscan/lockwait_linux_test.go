package mapscan

import (
	"os"
	"reflect"
	"testing"

	"mmlab/experiment/mapscan"
	"mmlab/live/tracefs"
)

// capturedWaits are the rw_semaphore waits of ../tracefs/testdata's
// capture (all tasks' lock:contention_begin with stacks and _end during a
// live mapscan run with text scanners, described in tracefs's parse test):
// the mapper is thread 8500, the scanners 8507 and 8513, the mapper's
// mmap_lock prints as 00000000ae60acde; kdamond (77) and the mapper sleep
// on its anon_vma's lock, 00000000c4bf4b73.
func capturedWaits(t *testing.T) []lockWait {
	t.Helper()
	f, err := os.Open("../tracefs/testdata/lock-contention.trace")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, _, err := tracefs.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := lockWaits(evs)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

var capturedSpan = lockSpan{Mapper: 8500, Scanners: []int{8507, 8513},
	From: 18810_364000_000, To: 18810_883000_000} // before the first event, after the last

// The waits pair each thread's rw_semaphore begin with its end on the same
// lock and name the function that took it from the begin's stack; the
// spinlocks' events are left out; the mmap_lock is the lock taken in
// vm_mmap_pgoff, __vm_munmap and lock_next_vma.
func TestLockWaitsCaptured(t *testing.T) {
	ws := capturedWaits(t)
	const mm, av = "00000000ae60acde", "00000000c4bf4b73"
	us := func(tid int, comm, addr string, caller string, b, e int64) lockWait {
		return lockWait{tid: tid, comm: comm, addr: addr, caller: caller, begin: 18810_000000_000 + b*1e3, end: 18810_000000_000 + e*1e3}
	}
	want := []lockWait{
		us(8507, "lt-mmlab", mm, "lock_next_vma", 364455, 364700),
		us(8500, "lt-mmlab", mm, "vm_mmap_pgoff", 364475, 364738),
		us(8513, "lt-mmlab", mm, "lock_next_vma", 364744, 375132),
		us(8500, "lt-mmlab", mm, "__vm_munmap", 364770, 375163),
		us(8507, "lt-mmlab", mm, "lock_next_vma", 866815, 866841),
		us(77, "kdamond.0", av, "folio_lock_anon_vma_read", 882616, 882705),
		us(8500, "lt-mmlab", av, "vma_prepare", 882627, 882739),
	}
	if !reflect.DeepEqual(ws, want) {
		t.Errorf("waits\n%+v\nwant\n%+v", ws, want)
	}
	// A scanner's waits are its threads' and its cats'; kdamond's are not.
	for _, c := range []struct {
		w    lockWait
		want bool
	}{{ws[0], true}, {ws[1], false}, {ws[5], false}, {lockWait{tid: 9000, comm: "cat"}, true}, {lockWait{tid: 9001, comm: "bash"}, false}} {
		if got := capturedSpan.scanner(c.w); got != c.want {
			t.Errorf("scanner(%+v) = %v, want %v", c.w, got, c.want)
		}
	}
	if got := capturedSpan.mmapLock(ws); got != mm {
		t.Errorf("the mapper's mmap_lock %q, want %q", got, mm)
	}
	// Without the mapper's own mmap_lock sleeps the scanners' name it; a
	// sleep without a stack names nothing.
	if got := (lockSpan{Mapper: 1, Scanners: capturedSpan.Scanners}).mmapLock(ws); got != mm {
		t.Errorf("the scanners' mmap_lock %q, want %q", got, mm)
	}
	for i := range ws {
		ws[i].caller = ""
	}
	if got := capturedSpan.mmapLock(ws); got != "" {
		t.Errorf("stackless waits name the mmap_lock %q", got)
	}
}

// The figures as the model gives them: the mapper's sleeps on its mmap_lock
// per call and the longest, the slowest call's part of them and of other
// rw_semaphores, the scanners' sleeps on the mmap_lock; clipped to the
// timed calls; another task's sleeps left out.
func TestLockFiguresCaptured(t *testing.T) {
	ws := capturedWaits(t)
	span := capturedSpan
	span.SlowFrom, span.SlowTo = 18810_364760_000, 18810_375170_000
	st := mapscan.Stats{Ops: 4}
	span.figures(ws, nil, &st)
	// The mapper slept 263 and 10393 us on the mmap_lock, the scanners
	// 245, 10388 and 26 us.
	want := mapscan.Stats{Ops: 4, LockWaitMeanUS: (263 + 10393) / 4.0, LockWaitMaxUS: 10393,
		MaxOpWaitUS:   map[string]float64{"mmap_lock": 10393},
		ScannersSlept: mapscan.Held{"mmap_lock": {Count: 3, MaxUS: 10388}}}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("figures %+v, want %+v", st, want)
	}

	// The slowest call is the munmap that split a VMA and slept 112 us on
	// its anon_vma's lock in vma_prepare, while kdamond walked the rmap.
	span.SlowFrom, span.SlowTo = 18810_882600_000, 18810_882750_000
	st = mapscan.Stats{Ops: 4}
	span.figures(ws, nil, &st)
	if want := map[string]float64{"rw_semaphore in vma_prepare": 112}; !reflect.DeepEqual(st.MaxOpWaitUS, want) {
		t.Errorf("the slowest call's sleeps %v, want %v", st.MaxOpWaitUS, want)
	}

	// Calls timed until 18810.370000: the munmap's sleep and the scanner's
	// are cut there, the slowest call no longer contains one.
	span.To, span.SlowFrom, span.SlowTo = 18810_370000_000, 18810_364000_000, 18810_364400_000
	st = mapscan.Stats{Ops: 4}
	span.figures(ws, nil, &st)
	want = mapscan.Stats{Ops: 4, LockWaitMeanUS: (263 + 5230) / 4.0, LockWaitMaxUS: 5230,
		ScannersSlept: mapscan.Held{"mmap_lock": {Count: 2, MaxUS: 5256}}}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("figures cut at 18810.370: %+v, want %+v", st, want)
	}

	// No one slept: the figures are zero, not absent. No call timed: no
	// window, no figures.
	st = mapscan.Stats{Ops: 4}
	span.figures(nil, nil, &st)
	if !reflect.DeepEqual(st, mapscan.Stats{Ops: 4}) {
		t.Errorf("figures without waits %+v", st)
	}
	st = mapscan.Stats{}
	span.figures(ws, nil, &st)
	if !reflect.DeepEqual(st, mapscan.Stats{}) {
		t.Errorf("figures without calls %+v", st)
	}
}

// testdata/lock-waking.trace is a stretch of an instance's trace file on
// this project's Linux 6.18 machine (trace_clock mono; lock:contention_*
// as startLockTrace sets them, and sched_waking with the filter
// "common_pid != 0", for all tasks) during `mmlab run mapscan --target
// live --cases none --runs 2`: the mapper, thread 23431, is woken from a
// nanosleep by the timer while kdamond.0 runs on its CPU, sleeps in
// anon_vma_clone on the anon_vma lock kdamond holds, and is woken by
// kdamond's release, then runs 1256 us later.
func TestLockWakeCaptured(t *testing.T) {
	f, err := os.Open("testdata/lock-waking.trace")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, lost, err := tracefs.Parse(f)
	if err != nil || lost != 0 {
		t.Fatalf("%d lost, %v", lost, err)
	}
	ws, err := lockWaits(evs)
	if err != nil {
		t.Fatal(err)
	}
	ks := wakings(evs)
	if len(ks) != 4 || ks[0] != (waking{tid: 23431, by: "kdamond.0", at: 8735_892136_000}) || ks[3].tid != 23434 {
		t.Errorf("wakings %+v: want four, the mapper's by kdamond.0 first, 23434's last", ks)
	}
	span := lockSpan{Mapper: 23431, From: 8735_880000_000, To: 8735_900000_000, SlowFrom: 8735_892200_000, SlowTo: 8735_893600_000}
	st := mapscan.Stats{Ops: 1}
	span.figures(ws, ks, &st)
	// The wake-ups before the sleep (the timer's, in kdamond's context)
	// and another thread's are not its end.
	if want := (&mapscan.Wake{By: "kdamond.0", RunWaitUS: 1256}); !reflect.DeepEqual(st.SlowestWake, want) {
		t.Errorf("the slowest call's sleep ended %+v, want %+v", st.SlowestWake, want)
	}
	if want := map[string]float64{"rw_semaphore in anon_vma_clone": 1283}; !reflect.DeepEqual(st.MaxOpWaitUS, want) {
		t.Errorf("the slowest call's sleeps %v, want %v", st.MaxOpWaitUS, want)
	}
	// Woken only before it began (the timer's two), the sleep's end is
	// unknown.
	for _, w := range ws {
		if w.tid == 23431 {
			if got := w.wake(ks[:2]); got != nil {
				t.Errorf("a sleep from %d woken before it: ended %+v", w.begin, got)
			}
		}
	}
	// Without the wake-ups, or with a slowest call that did not sleep,
	// nothing says how a sleep ended.
	for _, c := range []struct {
		ks       []waking
		from, to int64
	}{{nil, span.SlowFrom, span.SlowTo}, {ks, 8735_881000_000, 8735_882000_000}} {
		s := span
		s.SlowFrom, s.SlowTo = c.from, c.to
		st := mapscan.Stats{Ops: 1}
		s.figures(ws, c.ks, &st)
		if st.SlowestWake != nil {
			t.Errorf("slowest call [%d, %d], %d wakings: ended %+v", c.from, c.to, len(c.ks), st.SlowestWake)
		}
	}
}

// A wake-up's pid is the last " pid=" of its arguments: the woken task's
// comm, first, may itself contain one.
func TestWakingPID(t *testing.T) {
	for _, c := range []struct {
		args string
		tid  int
		ok   bool
	}{
		{"comm=mmlab pid=23431 prio=120 target_cpu=000", 23431, true},
		{"comm=a pid=7 b pid=23431 prio=120 target_cpu=000", 23431, true},
		{"comm=mmlab prio=120", 0, false},
		{"comm=mmlab pid=x prio=120", 0, false},
	} {
		if tid, ok := field(c.args, " pid="); tid != c.tid || ok != c.ok {
			t.Errorf("%q: %d, %v; want %d, %v", c.args, tid, ok, c.tid, c.ok)
		}
	}
}
