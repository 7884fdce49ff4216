package mm

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"mmlab/errno"
	"mmlab/mm/pgtable"
)

const pg = pgtable.PageSize

// layout renders m's VMAs as "start-end perms pgoff-if-file" relative to arena,
// in pages.
func layout(m *MM) string {
	var b []string
	for _, v := range m.VMAs() {
		s := fmt.Sprintf("%d-%d %v", (v.Start-arena)/pg, (v.End-arena)/pg, v.Flags)
		if v.File != nil {
			s += fmt.Sprintf(" @%d", v.Pgoff)
		}
		b = append(b, s)
	}
	return strings.Join(b, ", ")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mmapAnon(t *testing.T, m *MM, page, n uint64, prot int) {
	t.Helper()
	_, err := m.Mmap(nil, arena+page*pg, n*pg, prot, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED, nil, 0)
	must(t, err)
}

const rw = PROT_READ | PROT_WRITE

// The expected layouts below are what /proc/PID/maps showed on the live 6.18
// kernel for the same sequences (as do the goldens in testdata/traces,
// recorded live).

func TestAnonMergeSplitRemerge(t *testing.T) {
	t.Parallel()
	m := New(new(Namespace), testFeatures)
	mmapAnon(t, m, 0, 1, rw)
	mmapAnon(t, m, 1, 1, rw)
	if got := layout(m); got != "0-2 rw-p" {
		t.Fatalf("adjacent anon: %s", got)
	}
	must(t, m.StoreByte(nil, arena, 1))
	mmapAnon(t, m, 2, 1, rw) // takes p0's anon_vma
	if got := layout(m); got != "0-3 rw-p" {
		t.Fatalf("after touch + adjacent mmap: %s", got)
	}
	must(t, m.Mprotect(nil, arena+pg, pg, PROT_READ))
	if got := layout(m); got != "0-1 rw-p, 1-2 r--p, 2-3 rw-p" {
		t.Fatalf("mprotect middle RO: %s", got)
	}
	must(t, m.Mprotect(nil, arena+pg, pg, rw))
	if got := layout(m); got != "0-3 rw-p" {
		t.Fatalf("mprotect middle back: %s", got)
	}
	must(t, m.Munmap(nil, arena+pg, pg))
	if got := layout(m); got != "0-1 rw-p, 2-3 rw-p" {
		t.Fatalf("munmap middle: %s", got)
	}
	mmapAnon(t, m, 1, 1, rw)
	if got := layout(m); got != "0-3 rw-p" {
		t.Fatalf("MAP_FIXED into the hole: %s", got)
	}
	if v, err := m.LoadByte(nil, arena); err != nil || v != 1 {
		t.Fatalf("byte after merges: %d %v", v, err)
	}
}

func TestFileMergeNeedsSameFileAndOffsets(t *testing.T) {
	t.Parallel()
	m := New(new(Namespace), testFeatures)
	in := NewInode(new(Namespace), "f", 8*pg, func(off uint64) byte { return byte(off % 251) })
	f1, f2 := Open(in), Open(in)
	mapf := func(page, n uint64, f *File, pgoff uint64) {
		_, err := m.Mmap(nil, arena+page*pg, n*pg, PROT_READ, MAP_PRIVATE|MAP_FIXED, f, pgoff*pg)
		must(t, err)
	}
	mapf(0, 2, f1, 0)
	mapf(2, 2, f1, 2)
	mapf(4, 1, f1, 6) // offset gap
	mapf(5, 1, f2, 7) // another open()
	mapf(6, 1, f2, 8) // past EOF
	if got := layout(m); got != "0-4 r--p @0, 4-5 r--p @6, 5-7 r--p @7" {
		t.Fatalf("file merges: %s", got)
	}
	if v, err := m.LoadByte(nil, arena+3*pg+5); err != nil || v != byte((3*pg+5)%251) {
		t.Fatalf("file byte %d %v", v, err)
	}
	if _, err := m.LoadByte(nil, arena+6*pg); err != errno.Fault(errno.SIGBUS, errno.BUS_ADRERR) {
		t.Fatalf("load past EOF: %v, want SIGBUS", err)
	}
}

func TestForkCOWAndSharedVisibility(t *testing.T) {
	t.Parallel()
	m := New(new(Namespace), testFeatures)
	mmapAnon(t, m, 0, 1, rw)
	_, err := m.Mmap(nil, arena+4*pg, pg, rw, MAP_SHARED|MAP_ANONYMOUS|MAP_FIXED, nil, 0)
	must(t, err)
	must(t, m.StoreByte(nil, arena, 1))
	must(t, m.StoreByte(nil, arena+4*pg, 1))
	c, err := m.Fork(nil)
	must(t, err)
	must(t, c.StoreByte(nil, arena, 2))
	must(t, c.StoreByte(nil, arena+4*pg, 2))
	if v, _ := m.LoadByte(nil, arena); v != 1 {
		t.Errorf("child's private store visible in parent: %d", v)
	}
	if v, _ := m.LoadByte(nil, arena+4*pg); v != 2 {
		t.Errorf("child's shared store invisible in parent: %d", v)
	}
	if got := layout(c); got != "0-1 rw-p, 4-5 rw-s @0" {
		t.Errorf("child layout %s", got)
	}
	// Fork-child rule (live): the child's inherited faulted VMA has two
	// anon_vma_chain entries and does not merge with a new neighbour.
	mmapAnon(t, c, 1, 1, rw)
	if got := layout(c); got != "0-1 rw-p, 1-2 rw-p, 4-5 rw-s @0" {
		t.Errorf("child merged with inherited VMA: %s", got)
	}
	c.Exit()
	mmapAnon(t, m, 1, 1, rw)
	if got := layout(m); got != "0-2 rw-p, 4-5 rw-s @0" {
		t.Errorf("parent did not merge: %s", got)
	}
}

func TestMremapRules(t *testing.T) {
	t.Parallel()
	m := New(new(Namespace), testFeatures)
	mmapAnon(t, m, 0, 2, rw)
	_, err := m.Mremap(nil, arena, 2*pg, 4*pg, 0, 0)
	must(t, err)
	if got := layout(m); got != "0-4 rw-p" {
		t.Fatalf("grow in place: %s", got)
	}
	mmapAnon(t, m, 5, 1, PROT_READ)
	if _, err := m.Mremap(nil, arena, 4*pg, 6*pg, 0, 0); err == nil {
		t.Fatal("grow over a mapping succeeded")
	}
	// A faulted anon VMA moved next to a faulted neighbour keeps its
	// pgoff and does not merge (live); an unfaulted one takes the new
	// place's pgoff and merges.
	mmapAnon(t, m, 10, 1, rw)
	must(t, m.StoreByte(nil, arena+10*pg, 1))
	must(t, m.StoreByte(nil, arena, 1))
	_, err = m.Mremap(nil, arena, 4*pg, 4*pg, MREMAP_MAYMOVE|MREMAP_FIXED, arena+11*pg)
	must(t, err)
	if got := layout(m); got != "5-6 r--p, 10-11 rw-p, 11-15 rw-p" {
		t.Fatalf("faulted move: %s", got)
	}
	if v, _ := m.LoadByte(nil, arena+11*pg); v != 1 {
		t.Fatalf("moved byte %d", v)
	}
	mmapAnon(t, m, 20, 2, rw)
	_, err = m.Mremap(nil, arena+20*pg, 2*pg, 2*pg, MREMAP_MAYMOVE|MREMAP_FIXED, arena+15*pg)
	must(t, err)
	if got := layout(m); got != "5-6 r--p, 10-11 rw-p, 11-15 rw-p, 15-17 rw-p" {
		t.Fatalf("unfaulted move next to a faulted VMA: %s", got)
	}
}

// TestConcurrentAccessDuringPopulate runs loads, stores and faults of other
// threads while one thread populates under the read lock and another maps
// and unmaps (write lock): -race checks the locking.
func TestConcurrentAccessDuringPopulate(t *testing.T) {
	t.Parallel()
	m := New(new(Namespace), testFeatures)
	mmapAnon(t, m, 0, 64, rw)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		for range 20 {
			_, err := m.Mmap(nil, arena+1000*pg, 256*pg, rw, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED|MAP_POPULATE, nil, 0)
			if err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := range 2000 {
			if err := m.StoreByte(nil, arena+uint64(i%64)*pg, byte(i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for range 50 {
			// t.Error, not t.Fatal: this is not the test's goroutine.
			if _, err := m.Mmap(nil, arena+500*pg, 4*pg, rw, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED, nil, 0); err != nil {
				t.Error(err)
				return
			}
			if err := m.Munmap(nil, arena+500*pg, 4*pg); err != nil {
				t.Error(err)
				return
			}
			c, err := m.Fork(nil)
			if err != nil {
				t.Error(err)
				return
			}
			c.Exit()
		}
	}()
	wg.Wait()
	m.MmapReadLock(nil)
	defer m.MmapReadUnlock()
	if err := m.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestPlacementAndSpecialMapping: without MAP_FIXED consecutive mmaps go
// top-down, each right below the previous one, and merge (live: two 4 KiB
// anonymous mmaps returned ...871000 then ...870000 and merged); a special
// mapping keeps its name, maps its own pages and never merges.
func TestPlacementAndSpecialMapping(t *testing.T) {
	t.Parallel()
	m := New(new(Namespace), testFeatures)
	a1, err := m.Mmap(nil, 0, pg, rw, MAP_PRIVATE|MAP_ANONYMOUS, nil, 0)
	must(t, err)
	a2, err := m.Mmap(nil, 0, pg, rw, MAP_PRIVATE|MAP_ANONYMOUS, nil, 0)
	must(t, err)
	if a2 != a1-pg || len(m.VMAs()) != 1 {
		t.Fatalf("placement %#x then %#x, %d VMAs", a1, a2, len(m.VMAs()))
	}
	page := pgtable.NewAnonPage()
	page.SetByteAt(0, 0xcc)
	m.MmapWriteLock(nil)
	xol, err := m.GetUnmappedArea(m.TaskSize()-pg, pg)
	must(t, err)
	_, err = m.InstallSpecialMapping(xol, pg, VM_EXEC|VM_MAYEXEC|VM_DONTCOPY|VM_IO,
		&SpecialMapping{Name: "[uprobes]", Pages: []*pgtable.Page{page}})
	m.MmapWriteUnlock()
	must(t, err)
	if v, err := m.LoadByte(nil, xol); err != nil || v != 0xcc {
		t.Fatalf("special page read %#x %v", v, err)
	}
	if err := m.StoreByte(nil, xol, 1); err != errno.Fault(errno.SIGSEGV, errno.SEGV_ACCERR) {
		t.Fatalf("store into [uprobes]: %v", err)
	}
	c, err := m.Fork(nil)
	must(t, err)
	if len(c.VMAs()) != 1 {
		t.Errorf("VM_DONTCOPY mapping copied by fork: %d VMAs", len(c.VMAs()))
	}
}
