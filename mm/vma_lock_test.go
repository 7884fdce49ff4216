package mm

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mmlab/sched"
)

const lockArena = 0x7f0000000000

// mapPieces maps n private anonymous VMAs of 2 pages each at lockArena,
// alternating read-write and read-only so that they never merge.
func mapPieces(t *testing.T, m *MM, n int) []*VMA {
	t.Helper()
	for i := range n {
		prot := PROT_READ | PROT_WRITE
		if i%2 == 1 {
			prot = PROT_READ
		}
		if _, err := m.Mmap(nil, lockArena+uint64(i)*2*pg, 2*pg, prot, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	vs := m.VMAs()
	if len(vs) != n {
		t.Fatalf("%d VMAs, want %d", len(vs), n)
	}
	return vs
}

// waitFor spins (sched.Relax) until cond holds: the other task has reached
// the state the test drives it to. No timing is involved.
func waitFor(cond func() bool) {
	for !cond() {
		sched.Relax("wait for")
	}
}

// A VMA write lock lasts exactly as long as the mmap write section;
// unlock and downgrade both end it.
func TestVMAWriteLockEndsWithWriteSection(t *testing.T) {
	t.Parallel()
	m := New(new(Namespace), testFeatures)
	v := mapPieces(t, m, 2)[0]
	if got := m.LockVMAUnderRCU(v.Start); got != v {
		t.Fatalf("unlocked VMA: lock_vma_under_rcu = %p, want %p", got, v)
	}
	m.VMAEndRead(v)
	for _, end := range []string{"unlock", "downgrade"} {
		m.MmapWriteLock(nil)
		m.vmaStartWrite(v)
		if !m.VMAIsWriteLocked(v) {
			t.Fatal("vma_start_write did not lock")
		}
		if got, err := m.vmaStartRead(v); got != nil || err != nil {
			t.Fatalf("%s: vma_start_read on a write-locked VMA = %v, %v; want nil, nil", end, got, err)
		}
		if m.LockVMAUnderRCU(v.Start) != nil {
			t.Fatalf("%s: lock_vma_under_rcu locked a write-locked VMA", end)
		}
		if end == "unlock" {
			m.MmapWriteUnlock()
		} else {
			m.MmapWriteDowngrade()
			m.MmapReadUnlock()
		}
		if m.VMAIsWriteLocked(v) {
			t.Fatalf("%s left the VMA write-locked", end)
		}
		if got := m.LockVMAUnderRCU(v.Start); got != v {
			t.Fatalf("after %s: lock_vma_under_rcu = %p, want the VMA", end, got)
		}
		if n := v.RefCnt.Load(); n != 2 {
			t.Fatalf("attached VMA with one reader: vm_refcnt %d, want 2", n)
		}
		m.VMAEndRead(v)
	}
}

// A detached VMA is never read-locked: vma_start_read says EAGAIN, and
// lock_vma_under_rcu looks the address up again.
func TestDetachedVMANotLocked(t *testing.T) {
	t.Parallel()
	m := New(new(Namespace), testFeatures)
	vs := mapPieces(t, m, 3)
	v := vs[1]
	if err := m.Munmap(nil, v.Start, v.End-v.Start); err != nil {
		t.Fatal(err)
	}
	if n := v.RefCnt.Load(); n != 0 {
		t.Fatalf("unmapped VMA: vm_refcnt %d, want 0", n)
	}
	if got, err := m.vmaStartRead(v); got != nil || err != errVMADetached {
		t.Fatalf("vma_start_read on a detached VMA = %v, %v; want nil, EAGAIN", got, err)
	}
	if m.LockVMAUnderRCU(v.Start) != nil {
		t.Fatal("lock_vma_under_rcu found an unmapped address")
	}
	// Remap: a new VMA there, found and locked by a new lookup.
	if _, err := m.Mmap(nil, v.Start, 2*pg, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED, nil, 0); err != nil {
		t.Fatal(err)
	}
	got := m.LockVMAUnderRCU(v.Start)
	if got == nil || got == v {
		t.Fatalf("after remap: lock_vma_under_rcu = %p (old %p)", got, v)
	}
	m.VMAEndRead(got)
}

// A writer that modifies a VMA waits for its reader: mprotect does not
// change the VMA until the reader leaves, and its wait is accounted.
func TestWriterWaitsForVMAReader(t *testing.T) {
	forModes(t, func(t *testing.T, k tasks) {
		m := New(new(Namespace), testFeatures)
		v := mapPieces(t, m, 2)[0]
		if m.LockVMAUnderRCU(v.Start) != v {
			t.Fatal("cannot read-lock")
		}
		rec := &recorder{}
		var err error
		done := k.spawn("writer", func() { err = m.Mprotect(rec, v.Start, pg, PROT_READ) })
		// The writer has announced itself (VMA_LOCK_OFFSET) and waits.
		waitFor(func() bool { return v.RefCnt.Load()&VMA_LOCK_OFFSET != 0 })
		if v.Flags&VM_WRITE == 0 || v.End-v.Start != 2*pg {
			t.Fatal("the VMA changed under its reader")
		}
		if sched.TryRecv(done) {
			t.Fatalf("mprotect finished while a reader held the VMA (%v)", err)
		}
		// A second reader cannot enter while the writer waits.
		if got, _ := m.vmaStartRead(v); got != nil {
			t.Fatal("a new reader entered past a waiting writer")
		}
		m.VMAEndRead(v)
		wait(done)
		if err != nil {
			t.Fatal(err)
		}
		if n := v.RefCnt.Load(); n != 1 {
			t.Fatalf("after the write: vm_refcnt %d, want 1", n)
		}
		if rec.count(VMALockName) != 1 {
			t.Fatalf("the writer's wait was recorded %d times under %q, want 1", rec.count(VMALockName), VMALockName)
		}
	})
}

// Fork write-locks every parent VMA as it reaches it and keeps them
// locked to the end: while it waits for a reader of the second VMA, the
// first is already write-locked, so a fault there falls back to the mmap
// lock and waits for the fork.
func TestForkWriteLocksEveryVMA(t *testing.T) {
	forModes(t, func(t *testing.T, k tasks) {
		m := New(new(Namespace), testFeatures)
		vs := mapPieces(t, m, 2)
		a, b := vs[0], vs[1]
		if m.LockVMAUnderRCU(b.Start) != b {
			t.Fatal("cannot read-lock")
		}
		var c *MM
		var forkErr, faultErr error
		forked := k.spawn("fork", func() { c, forkErr = m.Fork(nil) })
		waitFor(func() bool { return b.RefCnt.Load()&VMA_LOCK_OFFSET != 0 })
		if !m.VMAIsWriteLocked(a) {
			t.Fatal("fork waits on the second VMA but the first is not write-locked")
		}
		if m.LockVMAUnderRCU(a.Start) != nil {
			t.Fatal("a copied VMA was read-locked during fork")
		}
		faulted := k.spawn("fault", func() { faultErr = m.StoreByte(nil, a.Start, 1) })
		waitFor(func() bool { return m.MmapLock.Waiters() == 1 })
		if sched.TryRecv(faulted) {
			t.Fatal("a fault on a copied VMA finished during fork")
		}
		m.VMAEndRead(b)
		wait(forked)
		wait(faulted)
		if forkErr != nil || faultErr != nil {
			t.Fatal(forkErr, faultErr)
		}
		if c.MapCount() != 2 || m.VMAIsWriteLocked(a) || m.VMAIsWriteLocked(b) {
			t.Fatal("fork did not finish cleanly")
		}
	})
}

// recorder is a locking.Waiter that counts the waits recorded by lock name.
type recorder struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *recorder) Fatal() <-chan struct{} { return nil }
func (r *recorder) CPU() int               { return -1 }
func (r *recorder) RecordBlocked(lock string, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[lock]++
}

func (r *recorder) count(lock string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[lock]
}

// Stress (run it with -race): faulting readers under VMA locks against
// writers that split, merge, unmap and remap the same VMAs. Every fault on
// an address that stays mapped succeeds, and the address space stays sound.
// Under the deterministic scheduler (fewer writes) each seed's run can be
// replayed.
func TestVMALockStress(t *testing.T) {
	forModes(t, func(t *testing.T, k tasks) {
		writes := 1500
		if k.sys != nil {
			writes = 150
		}
		m := New(new(Namespace), testFeatures)
		const n = 16
		mapPieces(t, m, n)
		var stop atomic.Bool
		var faults [3]int
		var readers []<-chan struct{}
		for r := range 3 {
			readers = append(readers, k.spawn(fmt.Sprintf("reader%d", r), func() {
				rng := rand.New(rand.NewPCG(uint64(r), 1))
				for !stop.Load() {
					// Even pieces' first pages stay mapped and writable;
					// each reader has its own (user data is not shared).
					i := uint64(rng.IntN(n/6)*3+r) * 2
					addr := lockArena + i*2*pg
					if err := m.StoreByte(nil, addr, byte(i)); err != nil {
						panic(err)
					}
					if b, err := m.LoadByte(nil, addr); err != nil || b != byte(i) {
						panic("lost a store")
					}
					faults[r]++
					if k.sys != nil {
						sched.At("reader loop", "")
					}
				}
			}))
		}
		rng := rand.New(rand.NewPCG(9, 9))
		for range writes {
			i := uint64(rng.IntN(n))
			second := lockArena + i*2*pg + pg // the second page of a piece
			var err error
			switch rng.IntN(3) {
			case 0:
				err = m.Mprotect(nil, second, pg, PROT_READ)
			case 1:
				err = m.Mprotect(nil, second, pg, PROT_READ|PROT_WRITE)
			case 2:
				if err = m.Munmap(nil, second, pg); err == nil {
					_, err = m.Mmap(nil, second, pg, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED, nil, 0)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		stop.Store(true)
		for _, r := range readers {
			wait(r)
		}
		m.MmapReadLock(nil)
		defer m.MmapReadUnlock()
		if err := m.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		for _, v := range m.VMAs() {
			if c := v.RefCnt.Load(); c != 1 {
				t.Fatalf("VMA %#x-%#x: vm_refcnt %d after all readers left, want 1", v.Start, v.End, c)
			}
		}
		if k.sys == nil {
			t.Logf("faults per reader: %v", faults)
		}
	})
}

// At VMA_REF_LIMIT readers a new reader fails like one that meets a writer
// (nil, not EAGAIN: the caller falls back to the mmap lock), and
// vma_start_read_locked fails too; below it both succeed.
func TestVMARefLimit(t *testing.T) {
	t.Parallel()
	m := New(new(Namespace), testFeatures)
	v := mapPieces(t, m, 1)[0]
	v.RefCnt.Store(VMA_REF_LIMIT)
	if got, err := m.vmaStartRead(v); got != nil || err != nil {
		t.Fatalf("at the limit: vma_start_read = %v, %v; want nil, nil", got, err)
	}
	if m.VMAStartReadLocked(v) {
		t.Fatal("at the limit: vma_start_read_locked succeeded")
	}
	v.RefCnt.Store(VMA_REF_LIMIT - 1)
	if got, _ := m.vmaStartRead(v); got != v {
		t.Fatal("below the limit: vma_start_read failed")
	}
	v.RefCnt.Store(1)
}
