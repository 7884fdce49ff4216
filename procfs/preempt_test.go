package procfs

import (
	"runtime"
	"sync/atomic"
	"testing"

	"mmlab/mm"
	"mmlab/sched"
)

// The priority inversion of seed 003, driven step by step on one model CPU:
// a nice-15 reader is preempted between two VMAs of a maps read by a
// normal-priority thread. With the Before walk it is preempted holding the
// mmap read lock, so a writer (mmap, munmap) cannot take the lock until the
// reader runs again; with the After walk it holds nothing there and the
// writer goes ahead.
func TestPreemptedReaderBlocksWriterOnlyBefore(t *testing.T) {
	t.Parallel()
	for _, v := range variants {
		m := piecesMM(t, 20)
		sys := sched.NewSystem(1)
		atPoint := make(chan struct{})
		release := make(chan struct{})
		var busyRunning atomic.Bool
		var points atomic.Int32
		readerDone := make(chan error, 1)
		sys.Spawn(0, 15, func(th *sched.Thread) {
			f := mustOpenMaps(m, Options{Variant: v, Preempt: PreemptFull, Point: func() {
				// The second point is between the first two VMAs.
				if points.Add(1) == 2 {
					atPoint <- struct{}{} // the test wakes the busy thread now
					<-atPoint
				}
				th.Point()
			}})
			_, err := f.ReadAll(nil)
			readerDone <- err
		})
		<-atPoint
		sys.Spawn(0, 0, func(th *sched.Thread) {
			busyRunning.Store(true)
			<-release // spins on the CPU: it holds it without blocking
		})
		atPoint <- struct{}{}
		for !busyRunning.Load() {
			runtime.Gosched()
		}
		wrote := make(chan struct{})
		go func() {
			m.MmapWriteLock(nil)
			m.MmapWriteUnlock()
			close(wrote)
		}()
		if v == Before {
			for m.MmapLock.Waiters() == 0 {
				runtime.Gosched()
			}
			select {
			case <-wrote:
				t.Fatal("before: the writer took the lock while the preempted reader held it")
			default:
			}
			close(release)
			<-wrote
		} else {
			<-wrote // nothing held: the writer goes ahead while the reader is off its CPU
			close(release)
		}
		if err := <-readerDone; err != nil {
			t.Fatal(err)
		}
		sys.Stop()
	}
}

// lock_next_vma falls back to the mmap read lock when the next VMA is
// write-locked, and so waits for the write section to end; it then returns
// the VMA read-locked.
func TestLockNextVMAFallsBackOnWriteLockedVMA(t *testing.T) {
	t.Parallel()
	m := piecesMM(t, 3)
	vs := m.VMAs()
	m.MmapWriteLock(nil)
	m.VMAStartWrite(vs[1]) // as an operation modifying it would

	fellBack := make(chan struct{})
	got := make(chan *mm.VMA)
	go func() {
		v, err := m.LockNextVMA(nil, vs[0].End, func(before bool) {
			if before {
				close(fellBack)
			}
		})
		if err != nil {
			t.Error(err)
		}
		got <- v
	}()
	<-fellBack
	for m.MmapLock.Waiters() == 0 {
		runtime.Gosched()
	}
	m.MmapWriteUnlock()
	v := <-got
	if v != vs[1] {
		t.Fatalf("got %p, want the second VMA", v)
	}
	if n := v.RefCnt.Load(); n != 2 {
		t.Fatalf("vm_refcnt %d, want 2 (attached + this reader)", n)
	}
	m.VMAEndRead(v)
	// No VMA above: nil, with no lock taken.
	if v, err := m.LockNextVMA(nil, vs[2].End, nil); v != nil || err != nil {
		t.Fatal("a VMA above the last one")
	}
}
