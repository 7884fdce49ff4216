package mm

import (
	"runtime"
	"testing"
)

// A file VMA's range changes under i_mmap_rwsem held for write (vma_prepare):
// while an rmap walker holds it for read, an mprotect that splits the VMA
// waits before it touches the range, so the walker's view stays whole.
func TestFileVMARangeChangesUnderIMmapWriteLock(t *testing.T) {
	m := New()
	in := NewInode("f", 4*pg, nil)
	if _, err := m.Mmap(nil, arena, 4*pg, PROT_READ, MAP_PRIVATE|MAP_FIXED, Open(in), 0); err != nil {
		t.Fatal(err)
	}
	v := m.VMAs()[0]
	in.IMmapRwsem.DownRead(nil) // an rmap walk in progress
	done := make(chan error)
	go func() { done <- m.Mprotect(nil, arena+pg, pg, PROT_READ|PROT_WRITE) }()
	for in.IMmapRwsem.Waiters() == 0 {
		runtime.Gosched()
	}
	buf := make([]byte, 1<<16)
	n := runtime.Stack(buf, true)
	t.Logf("%s", buf[:n])
	if v.Start != arena || v.End != arena+4*pg || v.Pgoff != 0 {
		t.Errorf("the range changed to %#x-%#x (pgoff %d) while i_mmap_rwsem was read-held", v.Start, v.End, v.Pgoff)
	}
	in.IMmapRwsem.UpRead()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(m.VMAs()); n != 3 {
		t.Fatalf("%d VMAs after the split, want 3", n)
	}
}

// exit_mmap unmaps the page tables under the mmap read lock first, which a
// maps reader shares; only freeing the VMAs waits for the write lock.
func TestExitUnmapsUnderReadLock(t *testing.T) {
	m := New()
	if _, err := m.Mmap(nil, arena, 2*pg, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED|MAP_POPULATE, nil, 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.PT.Lookup(arena); !ok {
		t.Fatal("the populated page is not mapped")
	}
	m.MmapReadLock(nil) // a reader, as a maps walk
	done := make(chan struct{})
	go func() { m.Exit(); close(done) }()
	for m.MmapLock.Waiters() == 0 {
		runtime.Gosched()
	}
	if _, ok := m.PT.Lookup(arena); ok {
		t.Error("exit waits for the write lock before unmapping the page tables")
	}
	if len(m.VMAs()) != 1 {
		t.Error("the VMA was freed without the write lock")
	}
	m.MmapReadUnlock()
	<-done
	if len(m.VMAs()) != 0 {
		t.Fatal("VMAs left after exit")
	}
}
