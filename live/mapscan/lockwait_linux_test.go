package mapscan

import (
	"os"
	"reflect"
	"testing"

	"mmlab/experiment/mapscan"
	"mmlab/live/tracefs"
)

// capturedWaits are the rw_semaphore waits of ../tracefs/testdata's
// capture (all tasks' lock:contention_begin and _end during a live
// mapscan run with text scanners, described in tracefs's parse test): the
// mapper is thread 28969, the scanners 28976 and 28983, the mapper's
// mmap_lock prints as 00000000489c72f5.
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

const (
	capturedStart = 18137_197000_000 // ns, before the first event
	capturedEnd   = 18137_220000_000 // after the last
)

// The waits pair each thread's rw_semaphore begin with its end on the same
// lock; the spinlocks' events and an end whose begin the capture missed
// are left out.
func TestLockWaitsCaptured(t *testing.T) {
	ws := capturedWaits(t)
	const lock = "00000000489c72f5"
	us := func(tid int, write bool, b, e int64) lockWait {
		return lockWait{tid: tid, addr: lock, write: write, begin: 18137_000000_000 + b*1e3, end: 18137_000000_000 + e*1e3}
	}
	want := []lockWait{
		us(28969, true, 197055, 197128),
		us(28976, false, 197231, 197404),
		us(28969, true, 197256, 197448),
		us(28976, false, 201307, 204864),
		us(28969, true, 201329, 204884),
		us(28976, false, 204977, 205282),
		us(28969, true, 204999, 205289),
		us(28976, false, 205573, 205574),
		us(28983, false, 205934, 217492),
		us(28969, true, 205953, 217513),
	}
	if !reflect.DeepEqual(ws, want) {
		t.Errorf("waits\n%+v\nwant\n%+v", ws, want)
	}
	if got := (lockSpan{Mapper: 28969, From: capturedStart, To: capturedEnd}).mmapLock(ws); got != lock {
		t.Errorf("the mapper's mmap_lock %q, want %q", got, lock)
	}
	// Without the mapper's write waits the scanners' lock is taken.
	if got := (lockSpan{Mapper: 1, From: capturedStart, To: capturedEnd}).mmapLock(ws); got != lock {
		t.Errorf("the scanners' lock %q, want %q", got, lock)
	}
}

// The figures as the model gives them: the mapper's sleeps on its mmap_lock
// per call and the longest, the slowest call's part of them, the scanners'
// sleeps on the same lock; clipped to the timed calls.
func TestLockFiguresCaptured(t *testing.T) {
	ws := capturedWaits(t)
	span := lockSpan{Mapper: 28969, From: capturedStart, To: capturedEnd,
		SlowFrom: 18137_205950_000, SlowTo: 18137_217520_000}
	st := mapscan.Stats{Ops: 10}
	span.figures(ws, &st)
	// The mapper slept 73+192+3555+290+11560 us, the scanners 173, 3557,
	// 305, 1 and 11558 us.
	want := mapscan.Stats{Ops: 10, LockWaitMeanUS: 1567, LockWaitMaxUS: 11560,
		MaxOpWaitUS:   map[string]float64{"mmap_lock": 11560},
		ScannersSlept: mapscan.Held{"mmap_lock": {Count: 5, MaxUS: 11558}}}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("figures %+v, want %+v", st, want)
	}

	// Calls timed until 18137.210000: the last sleeps are cut there, the
	// slowest call no longer contains one.
	span.To, span.SlowFrom, span.SlowTo = 18137_210000_000, 18137_200000_000, 18137_201000_000
	st = mapscan.Stats{Ops: 10}
	span.figures(ws, &st)
	want = mapscan.Stats{Ops: 10, LockWaitMeanUS: (73 + 192 + 3555 + 290 + 4047) / 10.0, LockWaitMaxUS: 4047,
		ScannersSlept: mapscan.Held{"mmap_lock": {Count: 5, MaxUS: 4066}}}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("figures cut at 18137.210: %+v, want %+v", st, want)
	}

	// No one slept: the figures are zero, not absent. No call timed: no
	// window, no figures.
	st = mapscan.Stats{Ops: 10}
	span.figures(nil, &st)
	if !reflect.DeepEqual(st, mapscan.Stats{Ops: 10}) {
		t.Errorf("figures without waits %+v", st)
	}
	st = mapscan.Stats{}
	span.figures(ws, &st)
	if !reflect.DeepEqual(st, mapscan.Stats{}) {
		t.Errorf("figures without calls %+v", st)
	}
}

// run-proc-vs-map.sh's placement on 4 or more CPUs (scanners on CPUs 2 and
// 3), all on CPU 1 on fewer.
func TestScannerCPUs(t *testing.T) {
	for ncpu, want := range map[int][]int{2: {1, 1}, 3: {1, 1}, 4: {2, 3}, 64: {2, 3}} {
		if got := scannerCPUs(ncpu); !reflect.DeepEqual(got, want) {
			t.Errorf("%d CPUs: %v, want %v", ncpu, got, want)
		}
	}
}
