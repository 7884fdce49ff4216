package locking

import (
	"sync"
	"testing"
)

// spinHook makes every optimistic spin of s call fn at each turn. Call it
// before s is shared.
func spinHook(s *RWSem, fn func()) { s.testHooks().spin = fn }

// A writer that finds readers holding the lock spins, and takes the lock
// the moment they leave without queueing (rwsem_optimistic_spin): it never
// sleeps, and the lock counts no contended acquisition.
func TestRWSemWriterSpinsOnReaders(t *testing.T) {
	var s RWSem
	s.DownRead(nil)
	var release sync.Once
	spun := 0
	spinHook(&s, func() {
		spun++
		release.Do(s.UpRead)
	})
	slept := false
	s.SetWriterHook(func(e HookEvent) {
		if e == WriterSleeps {
			slept = true
			release.Do(s.UpRead)
		}
	})
	s.DownWrite(nil)
	if !s.IsWriteLocked() {
		t.Fatal("DownWrite returned without the write lock")
	}
	if spun == 0 || slept || s.Stats().Contended != 0 {
		t.Fatalf("writer spun %d times, slept %v, contended %d: want it to spin and take the lock unqueued", spun, slept, s.Stats().Contended)
	}
	if s.owner.Load() != 0 {
		t.Fatalf("owner word %#x after a writer took the lock: want 0", s.owner.Load())
	}
	s.UpWrite()
}

// A writer gives up spinning on readers that keep the lock past
// rwsem_rspin_threshold: it marks the lock non-spinnable (which readers
// keep) and queues; the reader that leaves and wakes it clears the mark.
func TestRWSemSpinOnReadersTimesOut(t *testing.T) {
	var s RWSem
	s.DownRead(nil)
	spun := 0
	spinHook(&s, func() { spun++ })
	var atSleep uint32
	s.SetWriterHook(func(e HookEvent) {
		if e == WriterSleeps && atSleep == 0 {
			atSleep = s.owner.Load()
			s.setReaderOwned() // a reader's rwsem_set_reader_owned keeps the mark
			if s.owner.Load()&ownerNonspinnable == 0 {
				t.Error("rwsem_set_reader_owned dropped RWSEM_NONSPINNABLE")
			}
			if s.canSpinOnOwner() {
				t.Error("a non-spinnable lock lets the next writer spin")
			}
			s.UpRead() // wakes the writer: clear_nonspinnable
			if s.owner.Load()&ownerNonspinnable != 0 {
				t.Error("up_read that wakes the queue left RWSEM_NONSPINNABLE set")
			}
		}
	})
	s.DownWrite(nil)
	if atSleep != ownerReader|ownerNonspinnable {
		t.Fatalf("owner word %#x when the writer queued: want reader-owned and non-spinnable", atSleep)
	}
	if spun <= 16 || s.Stats().Contended != 1 {
		t.Fatalf("writer spun %d times, contended %d: want more than 16 turns (the threshold is checked every 16), then one queued wait", spun, s.Stats().Contended)
	}
	s.UpWrite()
}
