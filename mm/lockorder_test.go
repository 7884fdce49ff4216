package mm

import (
	"errors"
	"testing"

	"mmlab/locking/lockrank"
	"mmlab/sched"
	"mmlab/uapi"
)

// runLocked runs body as the one thread of a deterministic run and returns
// the run's error.
func runLocked(body func()) error {
	sys := sched.New(sched.Config{CPUs: 1, Deterministic: true})
	sys.SpawnNamed("test", 0, 0, func(*sched.Thread) { body() })
	_, err := sys.Run()
	return err
}

// Taking an mmap lock inside an i_mmap_rwsem inverts the documented order
// (mmap_lock, then i_mmap_rwsem): built with -tags invariants the run fails
// with lockrank.ErrOrder naming both; without the tag nothing checks it.
func TestLockOrderInversionFails(t *testing.T) {
	var ns Namespace
	m, in := New(&ns, testFeatures), NewInode(&ns, "/f", 4096, nil)
	err := runLocked(func() {
		in.IMmapRwsem.DownRead(nil)
		m.MmapWriteLock(nil)
		m.MmapWriteUnlock()
		in.IMmapRwsem.UpRead()
	})
	var oe *lockrank.OrderError
	if !invariants {
		if err != nil {
			t.Fatalf("without -tags invariants: %v, want no check", err)
		}
		return
	}
	var le *sched.LockOrderError
	if !errors.Is(err, lockrank.ErrOrder) || !errors.As(err, &le) || !errors.As(err, &oe) ||
		oe.Held != lockrank.IMmapRwsem || oe.Class != lockrank.MmapLock || le.Lock.Name != uapi.MmapLockName {
		t.Fatalf("got %v, want lockrank.ErrOrder for mmap_lock taken holding i_mmap_rwsem", err)
	}
}

// The documented order, a trylock against it, and a second mm's lock
// nested at SINGLE_DEPTH_NESTING pass; the same nesting without the
// subclass fails under -tags invariants.
func TestLockOrderNesting(t *testing.T) {
	var ns Namespace
	a, b, in := New(&ns, testFeatures), New(&ns, testFeatures), NewInode(&ns, "/f", 4096, nil)
	if err := runLocked(func() {
		a.MmapWriteLock(nil)
		in.IMmapRwsem.DownWrite(nil)
		in.IMmapRwsem.UpWrite()
		b.MmapWriteLockNested(nil, lockrank.SingleDepthNesting)
		b.MmapWriteUnlock()
		a.MmapWriteUnlock()
		in.IMmapRwsem.DownRead(nil)
		if a.MmapReadTrylock() {
			a.MmapReadUnlock()
		}
		in.IMmapRwsem.UpRead()
	}); err != nil {
		t.Fatalf("documented order, trylock, nested: %v", err)
	}
	err := runLocked(func() {
		a.MmapWriteLock(nil)
		b.MmapWriteLock(nil)
		b.MmapWriteUnlock()
		a.MmapWriteUnlock()
	})
	if invariants != errors.Is(err, lockrank.ErrOrder) {
		t.Fatalf("two mms' locks without a subclass: %v (invariants %v)", err, invariants)
	}
}
