package mm

import (
	"testing"
)

// TestPopulateUnderReadLock drives MAP_POPULATE of a file mapping to the
// moment it fills its first page-cache page, and checks that the mapping is
// already made and the mmap lock is then held for read only (vm_mmap_pgoff
// drops the write lock before mm_populate): another reader gets in, a writer
// does not.
func TestPopulateUnderReadLock(t *testing.T) {
	t.Parallel()
	m := New(new(Namespace), testFeatures)
	inFill := make(chan struct{})
	release := make(chan struct{})
	first := true
	in := NewInode(new(Namespace), "f", 4*pg, func(off uint64) byte {
		if first {
			first = false
			close(inFill)
			<-release
		}
		return 1
	})
	f := Open(in)
	done := make(chan error)
	go func() {
		_, err := m.Mmap(nil, arena, 4*pg, PROT_READ, MAP_SHARED|MAP_FIXED|MAP_POPULATE, f, 0)
		done <- err
	}()
	<-inFill
	if m.MmapLock.IsWriteLocked() {
		t.Error("populate runs with the mmap lock held for write")
	}
	if !m.MmapLock.DownReadTrylock() {
		t.Error("a reader cannot enter while populate runs")
	} else {
		if m.Tree().Load(arena) == nil {
			t.Error("the mapping is not there while populate runs")
		}
		m.MmapLock.UpRead()
	}
	if m.MmapLock.DownWriteTrylock() {
		t.Error("a writer got the mmap lock while populate holds it for read")
		m.MmapLock.UpWrite()
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if m.PT.Resident() != 4 {
		t.Errorf("%d pages populated, want 4", m.PT.Resident())
	}
}
