package locking

import "testing"

// fakeGP counts grace periods waited for and keeps the callbacks queued
// until the test runs them.
type fakeGP struct {
	syncs int
	cbs   []func()
}

func (g *fakeGP) Synchronize()   { g.syncs++ }
func (g *fakeGP) Call(fn func()) { g.cbs = append(g.cbs, fn) }

// runCallbacks runs the callbacks queued so far: their grace period ends.
func (g *fakeGP) runCallbacks() {
	cbs := g.cbs
	g.cbs = nil
	for _, fn := range cbs {
		fn()
	}
}

// rcu_sync's states (kernel/rcu/sync.c): the first writer after an idle
// period waits for a grace period, readers are on the slow path from then
// until a grace period after the last writer left; a writer who comes back
// before that goes ahead without waiting and makes the exit wait for one
// grace period more (GP_REPLAY).
func TestRCUSyncStates(t *testing.T) {
	gp := &fakeGP{}
	var s PercpuRWSem
	s.SetRCUSync(gp)
	if !s.ReaderFastPath() {
		t.Fatal("a new semaphore's readers are not on the fast path")
	}
	s.DownWrite(nil)
	if gp.syncs != 1 || s.ReaderFastPath() {
		t.Fatalf("first writer: %d grace periods, fast path %v; want 1, false", gp.syncs, s.ReaderFastPath())
	}
	s.UpWrite()
	if len(gp.cbs) != 1 || s.ReaderFastPath() {
		t.Fatalf("after the writer: %d callbacks, fast path %v; want 1, false", len(gp.cbs), s.ReaderFastPath())
	}
	// A writer within the grace period after the exit: no wait.
	s.DownWrite(nil)
	s.UpWrite()
	if gp.syncs != 1 || len(gp.cbs) != 1 {
		t.Fatalf("second writer: %d grace periods, %d callbacks; want 1, 1", gp.syncs, len(gp.cbs))
	}
	gp.runCallbacks() // GP_REPLAY -> GP_EXIT, queued again
	if len(gp.cbs) != 1 || s.ReaderFastPath() {
		t.Fatalf("replayed exit: %d callbacks, fast path %v; want 1, false", len(gp.cbs), s.ReaderFastPath())
	}
	gp.runCallbacks() // GP_EXIT -> GP_IDLE
	if len(gp.cbs) != 0 || !s.ReaderFastPath() {
		t.Fatalf("a grace period after the last writer: %d callbacks, fast path %v; want 0, true", len(gp.cbs), s.ReaderFastPath())
	}
	// Readers and a writer with the callback pending and a writer inside:
	// the callback finds the writer and leaves the readers on the slow path.
	s.DownWrite(nil)
	s.UpWrite()
	s.DownWrite(nil)
	gp.runCallbacks()
	if gp.syncs != 2 || s.ReaderFastPath() {
		t.Fatalf("callback with a writer inside: %d grace periods, fast path %v; want 2, false", gp.syncs, s.ReaderFastPath())
	}
	if s.DownReadTrylock(nil) {
		t.Fatal("a reader got in beside the writer")
	}
	s.UpWrite()
	gp.runCallbacks()
	if !s.ReaderFastPath() {
		t.Fatal("readers not back on the fast path")
	}
	s.DownRead(nil)
	s.UpRead(nil)
}

// DownWriteTrylock, which never sleeps, fails while a grace period would
// have to be waited for, and succeeds right after a writer left.
func TestRCUSyncTrylock(t *testing.T) {
	gp := &fakeGP{}
	var s PercpuRWSem
	s.SetRCUSync(gp)
	if s.DownWriteTrylock() {
		t.Fatal("trylock from idle succeeded without a grace period")
	}
	if !s.ReaderFastPath() || len(gp.cbs) != 0 {
		t.Fatalf("failed trylock left fast path %v, %d callbacks", s.ReaderFastPath(), len(gp.cbs))
	}
	s.DownWrite(nil)
	s.UpWrite()
	if !s.DownWriteTrylock() {
		t.Fatal("trylock after a writer failed")
	}
	s.UpWrite()
	if gp.syncs != 1 {
		t.Errorf("%d grace periods, want 1", gp.syncs)
	}
}
