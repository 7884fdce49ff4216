package mm

import (
	"testing"

	"mmlab/mm/pgtable"
)

// MAP_POPULATE of a read-only private anonymous mapping maps the shared
// zero page at every page, as a read fault does (do_anonymous_page without
// FAULT_FLAG_WRITE): no page of its own, no anon_vma (so fork copies no
// PTEs), and a later write fault breaks the copy as usual.
func TestPopulateReadOnlyMapsZeroPage(t *testing.T) {
	t.Parallel()
	const pages = 3 * 512 // three PTE tables
	m := New(new(Namespace), testFeatures)
	a, err := m.Mmap(nil, arena, pages*pgtable.PageSize, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED|MAP_POPULATE, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	zero := m.ns.zeroPage()
	for i := range uint64(pages) {
		pte, ok := m.PT.Lookup(a + i*pgtable.PageSize)
		if !ok || pte.Page != zero || pte.Write {
			t.Fatalf("page %d: %+v, %v; want the zero page, read-only", i, pte, ok)
		}
	}
	if m.PT.Resident() != pages {
		t.Errorf("%d resident PTEs, want %d", m.PT.Resident(), pages)
	}
	if v := m.FindVMA(a); v == nil || v.AnonVMA != nil {
		t.Errorf("VMA %+v: want one without an anon_vma", v)
	}
	if err := m.Mprotect(nil, a, pgtable.PageSize, PROT_READ|PROT_WRITE); err != nil {
		t.Fatal(err)
	}
	if err := m.StoreByte(nil, a, 1); err != nil {
		t.Fatal(err)
	}
	if pte, _ := m.PT.Lookup(a); pte.Page == zero || !pte.Write {
		t.Errorf("after a write: %+v, want a page of its own", pte)
	}
	if b, _ := m.PT.Lookup(a + pgtable.PageSize); b.Page != zero {
		t.Errorf("the next page is no longer the zero page: %+v", b)
	}
}
