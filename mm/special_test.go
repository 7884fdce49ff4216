package mm

import (
	"errors"
	"testing"

	"mmlab/errno"
	"mmlab/machine"
	"mmlab/mm/pgtable"
)

// mapAnon maps [start, end) as private anonymous memory at a fixed address.
func mapAnon(t *testing.T, m *MM, start, end uint64) {
	t.Helper()
	if _, err := m.Mmap(nil, start, end-start, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED, nil, 0); err != nil {
		t.Fatal(err)
	}
}

// vm_unmapped_area with page alignment: the lowest or highest page whose
// free range is at least two pages minus one byte (the alignment's worst
// case), inside the limits and above mmap_min_addr (4096 here; with
// CONFIG_LSM_MMAP_MIN_ADDR 65536 nothing below 0x10000 is found).
func TestUnmappedArea(t *testing.T) {
	t.Parallel()
	m := New(new(Namespace), machine.Features{MmapMinAddr: 4096})
	mapAnon(t, m, 0x10000, 0x20000)
	mapAnon(t, m, 0x21000, 0x30000) // a one-page hole at 0x20000: too small
	mapAnon(t, m, 0x32000, 0x40000) // a two-page hole at 0x30000
	m.MmapReadLock(nil)
	defer m.MmapReadUnlock()
	cases := []struct {
		low, high uint64
		topdown   bool
		want      uint64
		err       error
	}{
		{0x10000, 0x40000, false, 0x30000, nil},
		{0x10000 + 5, 0x100000, false, 0x30000, nil},
		{0x31000, 0x100000, false, 0x40000, nil}, // one page of the hole left: too small
		{0x10000, 0x40000, true, 0x31000, nil},
		{0x30000, 0x31fff, true, 0x30000, nil}, // exactly two pages minus one byte
		{0x30000, 0x31ffe, true, 0, errno.ENOMEM},
		{0, 0x10000, true, 0xf000, nil}, // below the first VMA, down to mmap_min_addr
		{0, 0x10000, false, pgtable.PageSize, nil},
		{0, 0x2000, false, 0, errno.ENOMEM},
		{0x40000, 0x40000 + 3*pg, true, 0x42000, nil},
	}
	for _, c := range cases {
		got, err := m.UnmappedArea(c.low, c.high, pg, c.topdown)
		if got != c.want || !errors.Is(err, c.err) && (err != nil || c.err != nil) {
			t.Errorf("UnmappedArea(%#x, %#x, topdown %v) = %#x, %v; want %#x, %v", c.low, c.high, c.topdown, got, err, c.want, c.err)
		}
	}
	lsm := New(new(Namespace), machine.Features{MmapMinAddr: 4096, LSMMmapMinAddr: 65536, CapSysRawio: true})
	mapAnon(t, lsm, 0x10000, 0x20000)
	lsm.MmapReadLock(nil)
	defer lsm.MmapReadUnlock()
	for _, topdown := range []bool{true, false} {
		if got, err := lsm.UnmappedArea(0, 0x10000, pg, topdown); !errors.Is(err, errno.ENOMEM) {
			t.Errorf("LSM mmap_min_addr 0x10000: UnmappedArea(0, 0x10000, topdown %v) = %#x, %v; want ENOMEM", topdown, got, err)
		}
	}
}

// A special mapping whose Mremap refuses cannot be moved (EPERM, and it
// stays), cannot grow (VM_DONTEXPAND: EFAULT), and can be unmapped.
func TestSpecialMappingMremapMunmap(t *testing.T) {
	t.Parallel()
	m := New(new(Namespace), testFeatures)
	sm := &SpecialMapping{Name: "[uprobes-trampoline]", Pages: []*pgtable.Page{pgtable.NewAnonPage()},
		Mremap: func() error { return errno.EPERM }}
	const at = 0x3ff000
	m.MmapWriteLock(nil)
	v, err := m.InstallSpecialMapping(at, pg, VM_READ|VM_EXEC|VM_MAYREAD|VM_MAYEXEC|VM_DONTCOPY|VM_IO, sm)
	m.MmapWriteUnlock()
	must(t, err)
	if !v.IsSpecialMapping(sm) || v.IsSpecialMapping(&SpecialMapping{Name: sm.Name}) {
		t.Fatal("IsSpecialMapping does not tell the mapping by identity")
	}
	if _, err := m.Mremap(nil, at, pg, pg, MREMAP_MAYMOVE|MREMAP_FIXED, 0x500000); !errors.Is(err, errno.EPERM) {
		t.Errorf("move: %v, want EPERM", err)
	}
	if _, err := m.Mremap(nil, at, pg, 2*pg, MREMAP_MAYMOVE, 0); !errors.Is(err, errno.EFAULT) {
		t.Errorf("grow: %v, want EFAULT", err)
	}
	if got := m.VMALookup(at); got != v {
		t.Fatalf("the mapping moved: %v", got)
	}
	must(t, m.Munmap(nil, at, pg))
	if m.VMALookup(at) != nil {
		t.Error("munmap left the mapping")
	}
}
