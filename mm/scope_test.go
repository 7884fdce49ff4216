package mm

import (
	"runtime"
	"testing"
)

// A file VMA's range changes under i_mmap_rwsem held for write (vma_prepare):
// while an rmap walker holds it for read, an mprotect that splits the VMA
// waits before it touches the range, so the walker's view stays whole.
func TestFileVMARangeChangesUnderIMmapWriteLock(t *testing.T) {
	t.Parallel()
	m := New(new(Namespace), testFeatures)
	in := NewInode(new(Namespace), "f", 4*pg, nil)
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
	t.Parallel()
	m := New(new(Namespace), testFeatures)
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

// MREMAP_DONTUNMAP moves a page and leaves its source VMA mapped and whole,
// as proc-maps-race.c's remap case relies on: the last page of B moved
// into the middle of A splits A in three, B's line stays; without
// MREMAP_FIXED, or resizing, it is refused.
func TestMremapDontUnmap(t *testing.T) {
	t.Parallel()
	m := New(new(Namespace), testFeatures)
	a, b := uint64(arena), uint64(arena+4*pg)
	if _, err := m.Mmap(nil, a, 3*pg, rw, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED, nil, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Mmap(nil, b, 3*pg, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED|MAP_POPULATE, nil, 0); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		old, new uint64
		flags    int
	}{{pg, pg, MREMAP_MAYMOVE | MREMAP_DONTUNMAP}, {pg, 2 * pg, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP}} {
		if _, err := m.Mremap(nil, b+2*pg, c.old, c.new, c.flags, a+pg); err == nil {
			t.Errorf("mremap %#x with old %d new %d: no error", c.flags, c.old, c.new)
		}
	}
	got, err := m.Mremap(nil, b+2*pg, pg, pg, MREMAP_MAYMOVE|MREMAP_FIXED|MREMAP_DONTUNMAP, a+pg)
	if err != nil || got != a+pg {
		t.Fatalf("mremap: %#x, %v", got, err)
	}
	type span struct{ s, e uint64 }
	var vs []span
	for _, v := range m.VMAs() {
		vs = append(vs, span{v.Start, v.End})
	}
	want := []span{{a, a + pg}, {a + pg, a + 2*pg}, {a + 2*pg, a + 3*pg}, {b, b + 3*pg}}
	if len(vs) != len(want) {
		t.Fatalf("VMAs %x, want %x", vs, want)
	}
	for i := range want {
		if vs[i] != want[i] {
			t.Fatalf("VMAs %x, want %x", vs, want)
		}
	}
	if _, ok := m.PT.Lookup(b + 2*pg); ok {
		t.Error("the source page is still mapped")
	}
	if _, ok := m.PT.Lookup(a + pg); !ok {
		t.Error("the page did not move")
	}
}
