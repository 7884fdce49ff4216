package locking_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"mmlab/errno"
	"mmlab/locking"
)

func TestRWSemUncontended(t *testing.T) {
	var s locking.RWSem
	s.DownRead(nil)
	s.DownRead(nil)
	if !s.IsLocked() || s.IsWriteLocked() {
		t.Fatal("two readers: want locked, not write-locked")
	}
	if !s.DownReadTrylock() {
		t.Fatal("read trylock with only readers and no waiters failed")
	}
	if s.DownWriteTrylock() {
		t.Fatal("write trylock succeeded while readers hold the lock")
	}
	s.UpRead()
	s.UpRead()
	s.UpRead()
	if s.IsLocked() {
		t.Fatal("locked after all readers left")
	}
	s.DownWrite(nil)
	if !s.IsWriteLocked() || s.DownReadTrylock() || s.DownWriteTrylock() {
		t.Fatal("write-held: trylocks must fail")
	}
	s.UpWrite()
	if !s.DownWriteTrylock() {
		t.Fatal("write trylock on a free lock failed")
	}
	s.UpWrite()
	if st := s.Stats(); st.Acquisitions != 5 || st.Contended != 0 {
		t.Fatalf("stats %+v: want 5 acquisitions (2 reads, 1 read trylock, 1 write, 1 write trylock), 0 contended", st)
	}
	if s.Count() != 0 {
		t.Fatalf("count %#x after balanced use, want 0", s.Count())
	}
}

// A queued writer blocks new readers, even while only readers hold the lock;
// read and write trylocks fail while anyone waits.
func TestRWSemQueuedWriterBlocksNewReader(t *testing.T) {
	s := locking.NewRWSem("mmap_lock")
	s.DownRead(nil) // R1
	w := startQueued(s, 1, func() { s.DownWrite(nil) })
	if !s.IsContended() {
		t.Fatal("IsContended false with a queued writer")
	}
	if s.DownReadTrylock() {
		t.Fatal("read trylock succeeded with a writer queued")
	}
	if s.DownWriteTrylock() {
		t.Fatal("write trylock succeeded with a writer queued")
	}
	r2 := start(nilErr(func() { s.DownRead(nil) }))
	waitFor(func() bool { return r2.finished() || s.Waiters() == 2 })
	if r2.finished() {
		t.Fatal("a new reader got in past a queued writer")
	}
	if got := kinds(s); got != "wr" {
		t.Fatalf("queue %q, want writer then reader", got)
	}
	s.UpRead() // R1 leaves: the writer, first in line, gets the lock
	mustFinish(t, w, "writer")
	if !s.IsWriteLocked() || r2.finished() || kinds(s) != "r" {
		t.Fatalf("after R1 left: write-locked %v, reader done %v, queue %q; want writer in, reader queued",
			s.IsWriteLocked(), r2.finished(), kinds(s))
	}
	s.UpWrite()
	mustFinish(t, r2, "reader")
	s.UpRead()
	if s.IsLocked() || s.IsContended() || s.Count() != 0 {
		t.Fatalf("count %#x at the end, want 0", s.Count())
	}
}

// A release with a reader first wakes every queued reader, including those
// behind a writer; the writer keeps its place.
func TestRWSemReleaseWakesAllReaders(t *testing.T) {
	s := locking.NewRWSem("sem")
	r1, w2, r2 := writeHeldQueueRWR(s)
	if got := kinds(s); got != "rwr" {
		t.Fatalf("queue %q, want rwr", got)
	}
	s.UpWrite()
	// The releaser hands the lock to the readers before it returns.
	mustHoldReadersQueueWriter(t, s, "release", r1, r2, w2, 2)
}

// mustHoldReadersQueueWriter checks what a release or a downgrade (after)
// of a write-held s with queue r1, w2, r2 leaves: the two readers hold the
// lock, and the writer stays queued, alone, until all the readers (holders
// in all) have released it, then gets it.
func mustHoldReadersQueueWriter(t *testing.T, s *locking.RWSem, after string, r1, r2, w2 *op, holders int) {
	t.Helper()
	if got := kinds(s); got != "w" {
		t.Fatalf("queue after the %s %q, want only the writer left", after, got)
	}
	mustFinish(t, r1, "reader 1")
	mustFinish(t, r2, "reader 2 (behind the writer)")
	for n := holders; n > 0; n-- {
		if w2.finished() || kinds(s) != "w" {
			t.Fatalf("writer done %v, queue %q while %d readers hold the lock; want the writer still queued", w2.finished(), kinds(s), n)
		}
		s.UpRead()
	}
	mustFinish(t, w2, "writer")
	s.UpWrite()
	mustBeFree(t, s)
}

// A release with a writer first wakes only that writer.
func TestRWSemWriterFirstWakesOnlyWriter(t *testing.T) {
	s := locking.NewRWSem("sem")
	s.DownWrite(nil)
	w2 := startQueued(s, 1, func() { s.DownWrite(nil) })
	r := startQueued(s, 2, func() { s.DownRead(nil) })
	s.UpWrite()
	mustFinish(t, w2, "writer 2")
	if r.finished() || kinds(s) != "r" {
		t.Fatalf("reader done %v, queue %q; want the reader still queued", r.finished(), kinds(s))
	}
	s.UpWrite()
	mustFinish(t, r, "reader")
	s.UpRead()
}

// Write trylock fails while the lock is free but a woken writer has not run
// yet; so does read trylock.
func TestRWSemTrylockFailsWithWaitersOnFreeLock(t *testing.T) {
	s := locking.NewRWSem("sem")
	ev := make(chan locking.HookEvent)
	gate := make(chan struct{})
	s.SetWriterHook(func(e locking.HookEvent) { ev <- e; <-gate })
	s.DownRead(nil)
	w := start(nilErr(func() { s.DownWrite(nil) }))
	expect(t, ev, locking.WriterSleeps)
	gate <- struct{}{}
	s.UpRead()
	expect(t, ev, locking.WriterWoken)
	if s.IsLocked() {
		t.Fatal("lock held while the woken writer waits at the gate")
	}
	if s.DownWriteTrylock() {
		t.Fatal("write trylock succeeded with a waiter queued")
	}
	if s.DownReadTrylock() {
		t.Fatal("read trylock succeeded with a waiter queued")
	}
	gate <- struct{}{}
	mustFinish(t, w, "writer")
	s.UpWrite()
}

func expect(t *testing.T, ev chan locking.HookEvent, want locking.HookEvent) {
	t.Helper()
	if got := <-ev; got != want {
		t.Fatalf("writer hook event %d, want %d", got, want)
	}
}

// Handoff: a reader may steal the lock from a woken writer while it is free,
// until the writer has been first in the queue for RWSemWaitTimeout; then
// the writer sets HANDOFF and the next reader queues instead.
func TestRWSemHandoff(t *testing.T) {
	for _, timedOut := range []bool{false, true} {
		clk := newFakeClock()
		s := locking.NewRWSem("sem")
		s.SetClock(clk.now)
		ev := make(chan locking.HookEvent)
		gate := make(chan struct{})
		s.SetWriterHook(func(e locking.HookEvent) { ev <- e; <-gate })

		s.DownRead(nil) // R1
		w := start(nilErr(func() { s.DownWrite(nil) }))
		expect(t, ev, locking.WriterSleeps)
		if timedOut {
			clk.advance(locking.RWSemWaitTimeout + 1)
		}
		gate <- struct{}{}
		s.UpRead() // R1 leaves and wakes the writer
		expect(t, ev, locking.WriterWoken)

		// The lock is free and no handoff is pending: R2 steals it.
		r2 := start(nilErr(func() { s.DownRead(nil) }))
		waitFor(func() bool { return r2.finished() || s.Waiters() == 2 })
		if !r2.finished() {
			t.Fatalf("timedOut=%v: reader did not steal a free lock without handoff", timedOut)
		}
		gate <- struct{}{}
		// The writer retries and fails; timed out, it sets HANDOFF.
		expect(t, ev, locking.WriterSleeps)
		if s.HasHandoff() != timedOut {
			t.Fatalf("timedOut=%v: handoff bit %v", timedOut, s.HasHandoff())
		}
		gate <- struct{}{}
		s.UpRead() // R2 leaves and wakes the writer
		expect(t, ev, locking.WriterWoken)

		r3 := start(nilErr(func() { s.DownRead(nil) }))
		waitFor(func() bool { return r3.finished() || s.Waiters() == 2 })
		if r3.finished() == timedOut {
			t.Fatalf("timedOut=%v: reader stole the free lock = %v, want %v",
				timedOut, r3.finished(), !timedOut)
		}
		if !timedOut {
			gate <- struct{}{}
			expect(t, ev, locking.WriterSleeps)
			gate <- struct{}{}
			s.UpRead()
			expect(t, ev, locking.WriterWoken)
		}
		gate <- struct{}{}
		mustFinish(t, w, "writer")
		if !s.IsWriteLocked() || s.HasHandoff() {
			t.Fatalf("timedOut=%v: writer in %v, handoff %v; want in, cleared", timedOut, s.IsWriteLocked(), s.HasHandoff())
		}
		if timedOut && kinds(s) != "r" {
			t.Fatalf("queue %q, want the reader that could not steal", kinds(s))
		}
		s.UpWrite()
		if timedOut {
			mustFinish(t, r3, "reader 3")
			s.UpRead()
		}
		if s.Count() != 0 {
			t.Fatalf("timedOut=%v: count %#x at the end", timedOut, s.Count())
		}
	}
}

// killQueued queues a victim task in down (a killable acquisition of s,
// which the caller holds so that it waits), then behind it a second waiter
// doing then; it kills the victim and checks that down failed with EINTR
// and that the queue is then wantQueue (kinds). It returns the victim and
// the second waiter.
func killQueued(t *testing.T, s *locking.RWSem, what string, down func(locking.Waiter) error, then func(), wantQueue string) (*task, *op) {
	t.Helper()
	victim := newTask("victim")
	o := start(func() error { return down(victim) })
	queued(s, 1)
	second := startQueued(s, 2, then)
	victim.Kill()
	mustEINTR(t, o, what)
	if got := kinds(s); got != wantQueue {
		t.Fatalf("queue after the kill of the %s %q, want %q", what, got, wantQueue)
	}
	return victim, second
}

// A killed reader leaves the queue with EINTR; the next waiter still gets
// the lock.
func TestRWSemKillableReadEINTR(t *testing.T) {
	s := locking.NewRWSem("sem")
	s.DownWrite(nil)
	victim, w2 := killQueued(t, s, "killed reader", s.DownReadKillable, func() { s.DownWrite(nil) }, "w")
	s.UpWrite()
	mustFinish(t, w2, "writer behind the killed reader")
	s.UpWrite()
	if s.Count() != 0 || s.IsContended() {
		t.Fatalf("count %#x at the end, want 0", s.Count())
	}
	st := s.Stats()
	if st.Interrupted != 1 || st.Contended != 2 || st.Acquisitions != 2 {
		t.Fatalf("stats %+v: want 1 interrupted, 2 contended, 2 acquisitions", st)
	}
	if n := len(victim.waits("sem")); n != 1 {
		t.Fatalf("victim recorded %d waits, want 1", n)
	}
}

// A killed writer at the head of the queue wakes the readers behind it,
// which join the readers holding the lock.
func TestRWSemKillableWriteWakesReadersBehind(t *testing.T) {
	s := locking.NewRWSem("sem")
	s.DownRead(nil)
	_, r2 := killQueued(t, s, "killed writer", s.DownWriteKillable, func() { s.DownRead(nil) }, "") // the reader behind is woken
	mustFinish(t, r2, "reader behind the killed writer")
	if s.Waiters() != 0 || s.IsContended() {
		t.Fatalf("queue %q, contended %v after the kill; want empty", kinds(s), s.IsContended())
	}
	s.UpRead()
	s.UpRead()
	if !s.DownWriteTrylock() {
		t.Fatal("write trylock failed on a free lock after the kill")
	}
	s.UpWrite()
}

// A killable waiter killed before it could be queued still takes a free
// lock (the kernel checks signals only when it would sleep).
func TestRWSemKillableTakesFreeLock(t *testing.T) {
	var s locking.RWSem
	victim := newTask("victim")
	victim.Kill()
	if err := s.DownWriteKillable(victim); err != nil {
		t.Fatalf("free lock, killed task: %v, want nil", err)
	}
	if err := s.DownReadKillable(victim); !errors.Is(err, errno.EINTR) {
		t.Fatalf("write-held lock, killed task: %v, want EINTR", err)
	}
	s.UpWrite()
	mustBeFree(t, &s)
}

// Downgrade keeps the caller as a reader and lets the queued readers in;
// queued writers stay.
func TestRWSemDowngrade(t *testing.T) {
	s := locking.NewRWSem("sem")
	r1, w2, r2 := writeHeldQueueRWR(s)
	s.DowngradeWrite()
	if s.IsWriteLocked() {
		t.Fatal("write-locked after downgrade")
	}
	mustHoldReadersQueueWriter(t, s, "downgrade", r1, r2, w2, 3)
}

// Every wait reaches both the lock's stats and the waiter's recorder, with
// the same duration.
func TestRWSemAccounting(t *testing.T) {
	s := locking.NewRWSem("mmap_lock")
	s.DownWrite(nil)
	tk := newTask("t")
	r := startQueued(s, 1, func() { s.DownRead(tk) })
	s.UpWrite()
	mustFinish(t, r, "reader")
	s.UpRead()
	waits := tk.waits("mmap_lock")
	if len(waits) != 1 || waits[0] <= 0 {
		t.Fatalf("task recorded %v, want one positive wait", waits)
	}
	st := s.Stats()
	if st.Contended != 1 || st.WaitTotal != waits[0] || st.WaitMax != waits[0] || st.Acquisitions != 2 {
		t.Fatalf("stats %+v, task wait %v: want 1 contended, total = max = the task's wait, 2 acquisitions", st, waits[0])
	}
	s.ResetStats()
	if st := s.Stats(); st != (locking.LockStats{}) {
		t.Fatalf("stats after reset %+v", st)
	}
}

func TestRWSemMisusePanics(t *testing.T) {
	for name, f := range map[string]func(s *locking.RWSem){
		"UpRead":         func(s *locking.RWSem) { s.UpRead() },
		"UpWrite":        func(s *locking.RWSem) { s.UpWrite() },
		"DowngradeWrite": func(s *locking.RWSem) { s.DowngradeWrite() },
		"UpWrite on read": func(s *locking.RWSem) {
			s.DownRead(nil)
			s.UpWrite()
		},
	} {
		mustPanic(t, name+" on an unlocked rwsem", func() { f(new(locking.RWSem)) })
	}
}

// Stress: readers, writers, trylocks, killable waits and downgrades at once.
// Never a reader and a writer inside together, never two writers, and the
// lock ends free with an empty queue.
func TestRWSemStress(t *testing.T) {
	s := locking.NewRWSem("stress")
	var x exclusion
	const workers, iters = 8, 2000
	stressWorkers(workers, func(g int) {
		rng := rand.New(rand.NewPCG(uint64(g), 1))
		tk := newTask("w")
		for i := range iters {
			if g == 0 && i == iters/2 {
				tk.Kill() // from here on its killable waits may fail
			}
			switch rng.IntN(8) {
			case 0, 1, 2:
				s.DownRead(tk)
				x.inRead()
				s.UpRead()
			case 3:
				s.DownWrite(tk)
				x.inWrite()
				s.UpWrite()
			case 4:
				if s.DownReadKillable(tk) == nil {
					x.inRead()
					s.UpRead()
				}
			case 5:
				if s.DownWriteKillable(tk) == nil {
					x.inWrite()
					s.DowngradeWrite()
					x.inRead()
					s.UpRead()
				}
			case 6:
				if s.DownReadTrylock() {
					x.inRead()
					s.UpRead()
				}
			case 7:
				if s.DownWriteTrylock() {
					x.inWrite()
					s.UpWrite()
				}
			}
		}
	})
	x.mustHaveExcluded(t)
	if s.Count() != 0 || s.Waiters() != 0 {
		t.Fatalf("end: count %#x, %d waiters; want 0, 0", s.Count(), s.Waiters())
	}
}

// A waiter on a model CPU sleeps through its Block.
func TestRWSemSleepsThroughBlocker(t *testing.T) {
	s := locking.NewRWSem("sem")
	s.DownWrite(nil)
	rt := &cpuTask{task: newTask("r")}
	r := startQueued(s, 1, func() { s.DownRead(rt) })
	wt := &cpuTask{task: newTask("w")}
	w := startQueued(s, 2, func() { s.DownWrite(wt) })
	s.UpWrite()
	mustFinish(t, r, "reader")
	s.UpRead()
	mustFinish(t, w, "writer")
	s.UpWrite()
	mustHaveBlocked(t, rt, wt)
}

// One wake-up grants the lock to at most 256 readers (MAX_READERS_WAKEUP);
// the rest stay queued until the lock is next released.
func TestRWSemReaderWakeupBatch(t *testing.T) {
	const n = 300
	s := locking.NewRWSem("sem")
	s.DownWrite(nil)
	ops := make([]*op, n)
	for i := range ops {
		ops[i] = startQueued(s, i+1, func() { s.DownRead(nil) })
	}
	s.UpWrite()
	if got := s.Waiters(); got != n-256 {
		t.Fatalf("%d readers still queued after one wake-up, want %d", got, n-256)
	}
	for i := range 256 {
		mustFinish(t, ops[i], "reader in the first batch")
	}
	for range 255 {
		s.UpRead()
	}
	if got := s.Waiters(); got != n-256 {
		t.Fatalf("%d queued while the first batch holds the lock, want %d", got, n-256)
	}
	s.UpRead() // the last of the batch wakes the rest
	if got := s.Waiters(); got != 0 {
		t.Fatalf("%d still queued after the first batch left, want 0", got)
	}
	for i := 256; i < n; i++ {
		mustFinish(t, ops[i], "reader in the second batch")
		s.UpRead()
	}
	mustBeFree(t, s)
}

// writeHeldQueueRWR takes s for writing and queues a reader, a writer and a
// reader behind it, in that order.
func writeHeldQueueRWR(s *locking.RWSem) (r1, w2, r2 *op) {
	s.DownWrite(nil)
	r1 = startQueued(s, 1, func() { s.DownRead(nil) })
	w2 = startQueued(s, 2, func() { s.DownWrite(nil) })
	r2 = startQueued(s, 3, func() { s.DownRead(nil) })
	return r1, w2, r2
}

// mustBeFree fails unless s's count word is 0: no holder, no waiter flags.
func mustBeFree(t *testing.T, s *locking.RWSem) {
	t.Helper()
	if s.Count() != 0 {
		t.Fatalf("count %#x at the end, want 0", s.Count())
	}
}

// The owner word every reader stores lies on another cache line than the
// count word, as mmap_lock's do in struct mm_struct.
func TestRWSemOwnerOffCountLine(t *testing.T) {
	if d := locking.RWSemOwnerDistance(); d < 64 {
		t.Errorf("owner %d bytes past count, want at least a 64-byte cache line", d)
	}
}
