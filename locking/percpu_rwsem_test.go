package locking_test

import (
	"math/rand/v2"
	"testing"

	"mmlab/locking"
)

func TestPercpuRWSemUncontended(t *testing.T) {
	var s locking.PercpuRWSem
	a, b := newTaskOn("a", 0), newTaskOn("b", 1)
	s.DownRead(a)
	s.DownRead(b)
	if !s.DownReadTrylock(nil) {
		t.Fatal("read trylock with only readers failed")
	}
	if s.Readers() != 3 || s.IsWriteLocked() {
		t.Fatalf("readers %d, write-locked %v; want 3, false", s.Readers(), s.IsWriteLocked())
	}
	if s.DownWriteTrylock() {
		t.Fatal("write trylock succeeded with readers inside")
	}
	// Decrements may land on other counters than the increments.
	s.UpRead(b)
	s.UpRead(b)
	s.UpRead(nil)
	if s.Readers() != 0 {
		t.Fatalf("readers %d after all left", s.Readers())
	}
	if !s.DownWriteTrylock() {
		t.Fatal("write trylock on a free lock failed")
	}
	if s.DownReadTrylock(a) {
		t.Fatal("read trylock succeeded while write-locked")
	}
	s.UpWrite()
	s.DownWrite(nil)
	s.UpWrite()
	if st := s.Stats(); st.Acquisitions != 5 || st.Contended != 0 {
		t.Fatalf("stats %+v: want 5 acquisitions (3 reads, 2 writes), 0 contended", st)
	}
}

// The writer sets block at once (new readers queue), waits for the readers
// inside, and at UpWrite the queued readers get in.
func TestPercpuRWSemWriterWaitsForReaders(t *testing.T) {
	s := locking.NewPercpuRWSem("dup_mmap_sem", 2)
	r1 := newTask("r1")
	s.DownRead(r1)
	wt := newTask("writer")
	w := start(nilErr(func() { s.DownWrite(wt) }))
	waitFor(s.WriterWaitingForReaders)
	if !s.IsWriteLocked() || w.finished() {
		t.Fatal("writer: want block set and the writer waiting for the reader")
	}
	if s.DownReadTrylock(nil) {
		t.Fatal("read trylock succeeded with a writer pending")
	}
	r2t := newTask("r2")
	r2 := start(nilErr(func() { s.DownRead(r2t) }))
	waitFor(func() bool { return r2.finished() || s.Waiters() == 1 })
	if r2.finished() {
		t.Fatal("a new reader got in past a pending writer")
	}
	s.UpRead(r1)
	mustFinish(t, w, "writer")
	if r2.finished() {
		t.Fatal("reader got in while the writer holds the lock")
	}
	s.UpWrite()
	mustFinish(t, r2, "queued reader")
	s.UpRead(r2t)
	mustBeFreePercpu(t, s)
	st := s.Stats()
	if st.Contended != 2 {
		t.Fatalf("stats %+v: want 2 contended (the writer, the second reader)", st)
	}
	for _, tk := range []*task{wt, r2t} {
		if ws := tk.waits("dup_mmap_sem"); len(ws) != 1 || ws[0] <= 0 {
			t.Fatalf("%s recorded %v, want one positive wait", tk.name, ws)
		}
	}
	if got := wt.waits("dup_mmap_sem")[0] + r2t.waits("dup_mmap_sem")[0]; got != st.WaitTotal {
		t.Fatalf("tasks' waits sum to %v, lock's WaitTotal %v", got, st.WaitTotal)
	}
}

// UpWrite wakes, in FIFO order, readers up to and including one writer;
// waiters behind that writer stay queued.
func TestPercpuRWSemWakeOrder(t *testing.T) {
	var s locking.PercpuRWSem
	s.DownWrite(nil)
	r1 := startQueued(&s, 1, func() { s.DownRead(nil) })
	r2 := startQueued(&s, 2, func() { s.DownRead(nil) })
	w2 := startQueued(&s, 3, func() { s.DownWrite(nil) })
	r3 := startQueued(&s, 4, func() { s.DownRead(nil) })
	w3 := startQueued(&s, 5, func() { s.DownWrite(nil) })

	s.UpWrite()
	// The waker takes the lock for the waiters it wakes before returning.
	if s.Waiters() != 2 {
		t.Fatalf("waiters after UpWrite %d, want 2 (reader 3, writer 3)", s.Waiters())
	}
	mustFinish(t, r1, "reader 1")
	mustFinish(t, r2, "reader 2")
	// The second writer was woken with block set on its behalf; it now
	// waits for readers 1 and 2.
	waitFor(s.WriterWaitingForReaders)
	if s.Waiters() != 2 || w2.finished() || r3.finished() {
		t.Fatalf("waiters %d (want 2: reader 3, writer 3), writer 2 done %v", s.Waiters(), w2.finished())
	}
	s.UpRead(nil)
	s.UpRead(nil)
	mustFinish(t, w2, "writer 2")
	s.UpWrite()
	mustFinish(t, r3, "reader 3")
	waitFor(s.WriterWaitingForReaders)
	s.UpRead(nil)
	mustFinish(t, w3, "writer 3")
	s.UpWrite()
	mustBeFreePercpu(t, &s)
}

// Writers exclude each other and are served in order.
func TestPercpuRWSemWritersFIFO(t *testing.T) {
	var s locking.PercpuRWSem
	s.DownWrite(nil)
	w2 := startQueued(&s, 1, func() { s.DownWrite(nil) })
	w3 := startQueued(&s, 2, func() { s.DownWrite(nil) })
	s.UpWrite()
	mustFinish(t, w2, "writer 2")
	if w3.finished() || s.Waiters() != 1 {
		t.Fatal("writer 3 woken together with writer 2")
	}
	s.UpWrite()
	mustFinish(t, w3, "writer 3")
	s.UpWrite()
}

// Stress: readers on various CPUs and writers; never a reader and a writer
// inside at once; counters balanced at the end.
func TestPercpuRWSemStress(t *testing.T) {
	var s locking.PercpuRWSem
	var x exclusion
	const workers, iters = 8, 2000
	stressWorkers(workers, func(g int) {
		rng := rand.New(rand.NewPCG(uint64(g), 2))
		tk := newTaskOn("w", g%3-1) // CPU -1, 0, 1
		for range iters {
			switch rng.IntN(8) {
			case 0, 1, 2, 3:
				s.DownRead(tk)
				x.inRead()
				s.UpRead(tk)
			case 4:
				if s.DownReadTrylock(tk) {
					x.inRead()
					s.UpRead(nil)
				}
			case 5, 6:
				s.DownWrite(tk)
				x.inWrite()
				s.UpWrite()
			case 7:
				if s.DownWriteTrylock() {
					x.inWrite()
					s.UpWrite()
				}
			}
		}
	})
	x.mustHaveExcluded(t)
	mustBeFreePercpu(t, &s)
}

func TestPercpuRWSemSleepsThroughBlocker(t *testing.T) {
	var s locking.PercpuRWSem
	s.DownRead(nil)
	wt := &cpuTask{task: newTask("w")}
	w := start(nilErr(func() { s.DownWrite(wt) }))
	waitFor(s.WriterWaitingForReaders)
	rt := &cpuTask{task: newTask("r")}
	r := startQueued(&s, 1, func() { s.DownRead(rt) })
	s.UpRead(nil)
	mustFinish(t, w, "writer")
	s.UpWrite()
	mustFinish(t, r, "reader")
	s.UpRead(rt)
	mustHaveBlocked(t, rt, wt)
}

// mustBeFreePercpu fails unless s ends with no reader inside, block clear
// and an empty queue.
func mustBeFreePercpu(t *testing.T, s *locking.PercpuRWSem) {
	t.Helper()
	if s.Readers() != 0 || s.IsWriteLocked() || s.Waiters() != 0 {
		t.Fatalf("end: readers %d, block %v, waiters %d", s.Readers(), s.IsWriteLocked(), s.Waiters())
	}
}
