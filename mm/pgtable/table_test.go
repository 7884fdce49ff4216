package pgtable

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

const (
	mib = 1 << 20
	gib = 1 << 30
)

// tableCount counts the allocated PUD, PMD and PTE tables, in the first
// 2^48 bytes and in the P4D tables above.
func tableCount(t *Table) (puds, pmds, ptes int) {
	var slots []*[entries]atomic.Pointer[pudTable]
	if g := t.pgd.Load(); g != nil {
		slots = append(slots, &g.e)
	}
	if up := t.upper.Load(); up != nil {
		for i := range up.e {
			if p4d := up.e[i].Load(); p4d != nil {
				slots = append(slots, &p4d.e)
			}
		}
	}
	for _, pgd := range slots {
		p, m, e := pudCount(pgd)
		puds, pmds, ptes = puds+p, pmds+m, ptes+e
	}
	return
}

// p4dCount counts the allocated P4D tables above 2^48.
func p4dCount(t *Table) int {
	n := 0
	if up := t.upper.Load(); up != nil {
		for i := range up.e {
			if up.e[i].Load() != nil {
				n++
			}
		}
	}
	return n
}

func pudCount(pgd *[entries]atomic.Pointer[pudTable]) (puds, pmds, ptes int) {
	for i := range pgd {
		pud := pgd[i].Load()
		if pud == nil {
			continue
		}
		puds++
		for j := range pud.e {
			pmd := pud.e[j].Load()
			if pmd == nil {
				continue
			}
			pmds++
			for k := range pmd.e {
				if pmd.e[k].Load() != nil {
					ptes++
				}
			}
		}
	}
	return
}

// Addresses on both sides of every level's boundary: last page of a PTE table
// and first of the next, and the same for PMD (1 GiB), PUD (512 GiB) and
// P4D (2^48, 5-level paging), plus both ends of the 57-bit space.
var boundaryAddrs = []uint64{
	0, PageSize, 2*mib - PageSize, 2 * mib,
	gib - PageSize, gib, 512*gib - PageSize, 512 * gib,
	1<<48 - PageSize, 1 << 48,
	AddrLimit - PageSize,
}

func TestSetLookupClearAcrossLevels(t *testing.T) {
	t.Parallel()
	tb := NewTable()
	pages := map[uint64]*Page{}
	for i, a := range boundaryAddrs {
		p := NewAnonPageAt(a >> PageShift)
		pages[a] = p
		tb.Set(a, PTE{Page: p, Write: i%2 == 0, Dirty: i%3 == 0})
	}
	if tb.Resident() != len(boundaryAddrs) {
		t.Fatalf("Resident = %d, want %d", tb.Resident(), len(boundaryAddrs))
	}
	for i, a := range boundaryAddrs {
		e, ok := tb.Lookup(a + 123) // any address inside the page
		want := PTE{Page: pages[a], Write: i%2 == 0, Dirty: i%3 == 0}
		if !ok || e != want {
			t.Fatalf("Lookup(%#x) = %+v %v, want %+v", a, e, ok, want)
		}
		if pages[a].MapCount() != 1 {
			t.Fatalf("mapcount %d", pages[a].MapCount())
		}
		// Neighbouring pages are not mapped (unless they are in the list).
		if _, ok := tb.Lookup(a + PageSize); ok && pages[a+PageSize] == nil {
			t.Fatalf("Lookup(%#x) found a page never set", a+PageSize)
		}
	}
	// P4D tables above 2^48 for 2^48 and the top; PUD tables for the
	// 512 GiB regions 0, 1 and 511 and one in each P4D; PMD tables for
	// GiB 0, 1 and 511 of region 0 and one each in the other four; PTE
	// tables for MiB 0-2 (three addresses), 2-4, GiB 1 minus 2 MiB, GiB 1,
	// 512 GiB minus 2 MiB, 512 GiB, 2^48 minus 2 MiB, 2^48 and the top.
	puds, pmds, ptes := tableCount(tb)
	if p4ds := p4dCount(tb); p4ds != 2 || puds != 5 || pmds != 7 || ptes != 9 {
		t.Fatalf("tables: %d P4D %d PUD %d PMD %d PTE, want 2 5 7 9", p4ds, puds, pmds, ptes)
	}
	// Replacing a PTE moves the mapcount from the old page to the new one.
	np := NewAnonPage()
	tb.Set(0, PTE{Page: np})
	if pages[0].MapCount() != 0 || np.MapCount() != 1 || tb.Resident() != len(boundaryAddrs) {
		t.Fatal("Set over a present PTE did not move the mapcount")
	}
	for _, a := range boundaryAddrs {
		e, ok := tb.Clear(a)
		if !ok || e.Page == nil {
			t.Fatalf("Clear(%#x) found nothing", a)
		}
		if _, ok := tb.Lookup(a); ok {
			t.Fatalf("Lookup(%#x) after Clear", a)
		}
		if _, ok := tb.Clear(a); ok {
			t.Fatal("second Clear found a PTE")
		}
	}
	if tb.Resident() != 0 || np.MapCount() != 0 {
		t.Fatal("Clear did not drop counts")
	}
	if _, ok := tb.Lookup(AddrLimit); ok {
		t.Fatal("Lookup beyond the address space")
	}
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	tb := NewTable()
	p := NewAnonPage()
	tb.Update(5*PageSize, func(old PTE, ok bool) (PTE, bool) {
		if ok || old.Page != nil {
			t.Fatal("Update saw a PTE in an empty table")
		}
		return PTE{Page: p}, true
	})
	tb.Update(5*PageSize, func(old PTE, ok bool) (PTE, bool) {
		if !ok || old.Page != p || old.Write {
			t.Fatalf("Update saw %+v %v", old, ok)
		}
		old.Write, old.Dirty = true, true
		return old, true
	})
	if e, _ := tb.Lookup(5 * PageSize); !e.Write || !e.Dirty || p.MapCount() != 1 {
		t.Fatalf("after Update: %+v mapcount %d", e, p.MapCount())
	}
	tb.Update(5*PageSize, func(PTE, bool) (PTE, bool) { return PTE{}, false })
	if _, ok := tb.Lookup(5 * PageSize); !ok {
		t.Fatal("Update returning false changed the PTE")
	}
	tb.Update(5*PageSize, func(PTE, bool) (PTE, bool) { return PTE{}, true })
	if _, ok := tb.Lookup(5 * PageSize); ok || p.MapCount() != 0 || tb.Resident() != 0 {
		t.Fatal("Update to a none PTE did not clear")
	}
}

func TestPopulate(t *testing.T) {
	t.Parallel()
	tb := NewTable()
	// An odd range across three PTE tables, one page already present.
	start, end := uint64(2*mib-3*PageSize), uint64(6*mib+5*PageSize)
	pre := NewAnonPage()
	tb.Set(2*mib, PTE{Page: pre})
	tb.Populate(start, end, nil, true)
	n := int(end-start) / PageSize
	if tb.Resident() != n {
		t.Fatalf("Resident = %d, want %d", tb.Resident(), n)
	}
	for a := start; a < end; a += PageSize {
		e, ok := tb.Lookup(a)
		if !ok || e.Page.MapCount() != 1 || !e.Page.IsAnon() {
			t.Fatalf("%#x: %+v %v", a, e, ok)
		}
		if a == 2*mib {
			if e.Page != pre || e.Write {
				t.Fatal("Populate replaced a present PTE")
			}
			continue
		}
		if !e.Write || !e.Dirty || !e.Young || e.Page.Index() != a>>PageShift {
			t.Fatalf("%#x: %+v index %d", a, e, e.Page.Index())
		}
		if e.Page.Materialized() || e.Page.ByteAt(100) != 0 {
			t.Fatal("populated page has storage before it is written")
		}
	}
	if _, ok := tb.Lookup(end); ok {
		t.Fatal("Populate went past end")
	}
	// Walk visits the range in order and stops when told to.
	var seen []uint64
	tb.Walk(start+PageSize, end, func(a uint64, e PTE) bool {
		seen = append(seen, a)
		return len(seen) < 600
	})
	if len(seen) != 600 || seen[0] != start+PageSize || seen[599] != start+600*PageSize {
		t.Fatalf("Walk visited %d pages from %#x", len(seen), seen[0])
	}
	if _, ok := tb.Lookup(start - PageSize); ok {
		t.Fatal("Populate started before start")
	}
	// PopulateAnon numbers pages from the given index (a moved VMA).
	tb.PopulateAnon(20*mib-PageSize, 20*mib+PageSize, 7, false)
	for i := uint64(0); i < 2; i++ {
		if e, ok := tb.Lookup(20*mib - PageSize + i*PageSize); !ok || e.Page.Index() != 7+i || e.Write {
			t.Fatalf("PopulateAnon page %d: %+v", i, e)
		}
	}
	// With newPage (a file mapping read fault): read-only, clean PTEs.
	c := NewCache(func(i uint64, p *Page) { p.SetByteAt(0, byte(i)) })
	tb.Populate(10*mib, 10*mib+4*PageSize, func(a uint64) *Page { return c.Get((a - 10*mib) >> PageShift) }, false)
	for i := uint64(0); i < 4; i++ {
		e, ok := tb.Lookup(10*mib + i*PageSize)
		if !ok || e.Write || e.Dirty || e.Page.IsAnon() || e.Page.ByteAt(0) != byte(i) || e.Page.Mapping() != c {
			t.Fatalf("file page %d: %+v", i, e)
		}
	}
}

func TestZapFreesTables(t *testing.T) {
	t.Parallel()
	tb := NewTable()
	tb.Populate(gib-2*mib, gib+4*mib, nil, false)
	tb.Set(600*gib, PTE{Page: NewAnonPage()})
	if puds, pmds, ptes := tableCount(tb); puds != 2 || pmds != 3 || ptes != 4 {
		t.Fatalf("before: %d %d %d", puds, pmds, ptes)
	}
	// Zapping part of a table keeps it; the zapped PTEs are reported once.
	seen := map[uint64]bool{}
	tb.Zap(gib-2*mib, gib-mib, func(a uint64, e PTE) {
		if seen[a] || e.Page.MapCount() != 0 || e.Page.Index() != a>>PageShift {
			t.Fatalf("zap callback at %#x: %+v", a, e)
		}
		seen[a] = true
	})
	if len(seen) != 256 || tb.Resident() != 6*mib/PageSize-256+1 {
		t.Fatalf("zapped %d, resident %d", len(seen), tb.Resident())
	}
	if _, _, ptes := tableCount(tb); ptes != 4 {
		t.Fatalf("a partly zapped table was freed: %d", ptes)
	}
	// Zapping the rest of the first 1 GiB frees its PTE tables and PMD.
	tb.Zap(gib-mib, gib, nil)
	if puds, pmds, ptes := tableCount(tb); puds != 2 || pmds != 2 || ptes != 3 {
		t.Fatalf("after zapping the first GiB: %d %d %d", puds, pmds, ptes)
	}
	// Above 2^48 (5-level paging) the P4D table goes with its last PUD.
	tb.Set(1<<50, PTE{Page: NewAnonPage()})
	tb.Set(1<<50+600*gib, PTE{Page: NewAnonPage()})
	if p4ds := p4dCount(tb); p4ds != 1 {
		t.Fatalf("P4D tables %d, want 1", p4ds)
	}
	tb.Zap(1<<50, 1<<50+PageSize, nil)
	if p4ds := p4dCount(tb); p4ds != 1 {
		t.Fatalf("a P4D table with a PUD left was freed: %d", p4ds)
	}
	tb.Zap(0, AddrLimit, nil)
	if puds, pmds, ptes := tableCount(tb); puds+pmds+ptes+p4dCount(tb) != 0 || tb.Resident() != 0 {
		t.Fatalf("after zapping everything: %d %d %d %d resident %d", p4dCount(tb), puds, pmds, ptes, tb.Resident())
	}
	// The table is usable again afterwards.
	tb.Set(gib, PTE{Page: NewAnonPage()})
	if _, ok := tb.Lookup(gib); !ok {
		t.Fatal("Set after Zap lost")
	}
}

func TestMovePreservesContents(t *testing.T) {
	t.Parallel()
	tb := NewTable()
	// Source spans a PTE-table boundary; the destination is not aligned
	// the same way, so each source table feeds two destination tables.
	oldS, oldE := uint64(4*mib-8*PageSize), uint64(4*mib+8*PageSize)
	newS := uint64(42*mib - 5*PageSize)
	tb.Populate(oldS, oldE, nil, true)
	tb.Clear(oldS + 2*PageSize) // a hole moves as a hole
	var pages []*Page
	for a := oldS; a < oldE; a += PageSize {
		e, ok := tb.Lookup(a)
		if ok {
			e.Page.SetByteAt(7, byte(a>>PageShift))
		}
		pages = append(pages, e.Page)
	}
	res := tb.Resident()
	tb.Move(oldS, oldE, newS)
	if tb.Resident() != res {
		t.Fatalf("Resident %d -> %d", res, tb.Resident())
	}
	for i, a := 0, oldS; a < oldE; i, a = i+1, a+PageSize {
		if _, ok := tb.Lookup(a); ok {
			t.Fatalf("old %#x still mapped", a)
		}
		e, ok := tb.Lookup(newS + uint64(i)*PageSize)
		if pages[i] == nil {
			if ok {
				t.Fatal("hole became a page")
			}
			continue
		}
		if !ok || e.Page != pages[i] || !e.Write || !e.Dirty || e.Page.MapCount() != 1 || e.Page.ByteAt(7) != byte(a>>PageShift) {
			t.Fatalf("moved %#x: %+v %v", a, e, ok)
		}
	}
	if _, pmds, ptes := tableCount(tb); pmds != 1 || ptes != 2 {
		t.Fatalf("old tables not freed: %d PMD %d PTE tables, want 1 2 (the destination's)", pmds, ptes)
	}
	// Moving a range whose table holds no PTEs allocates no table (and
	// frees the empty one).
	tb.Set(100*mib, PTE{Page: NewAnonPage()})
	tb.Clear(100 * mib)
	tb.Move(100*mib, 104*mib, 200*mib)
	if _, _, ptes := tableCount(tb); ptes != 2 {
		t.Fatalf("moving nothing made tables: %d", ptes)
	}
}

func TestCopyCOW(t *testing.T) {
	t.Parallel()
	parent, child := NewTable(), NewTable()
	tb := parent
	tb.Populate(0, 16*PageSize, nil, true) // private anon, written
	tb.Populate(16*PageSize, 20*PageSize, nil, false)
	c := NewCache(nil)
	for i := uint64(0); i < 4; i++ { // shared file mapping, written
		tb.Set(3*mib+i*PageSize, PTE{Page: c.Get(i), Write: true, Dirty: true, Young: true})
	}
	if n := tb.CopyCOW(child, 0, 4*mib); n != 24 {
		t.Fatalf("CopyCOW copied %d present PTEs, want 24", n)
	}
	if child.Resident() != 24 || parent.Resident() != 24 {
		t.Fatalf("resident parent %d child %d", parent.Resident(), child.Resident())
	}
	check := func(a uint64, anon bool) {
		pe, _ := parent.Lookup(a)
		ce, ok := child.Lookup(a)
		if !ok || ce.Page != pe.Page || pe.Page.MapCount() != 2 {
			t.Fatalf("%#x: parent %+v child %+v", a, pe, ce)
		}
		if ce.Young {
			t.Fatal("child PTE young")
		}
		if anon {
			if pe.Write || ce.Write {
				t.Fatalf("%#x: anon page writable after fork", a)
			}
			if pe.Dirty != ce.Dirty {
				t.Fatal("anon dirty bit not copied")
			}
		} else if !pe.Write || !ce.Write || ce.Dirty || !pe.Dirty {
			t.Fatalf("%#x: shared PTE changed: parent %+v child %+v", a, pe, ce)
		}
	}
	for a := uint64(0); a < 20*PageSize; a += PageSize {
		check(a, true)
	}
	for i := uint64(0); i < 4; i++ {
		check(3*mib+i*PageSize, false)
	}
	// Only the given range is copied.
	grandchild := NewTable()
	if n := parent.CopyCOW(grandchild, 3*mib+PageSize, 3*mib+2*PageSize); n != 1 || grandchild.Resident() != 1 || c.Get(1).MapCount() != 3 || c.Get(0).MapCount() != 2 {
		t.Fatal("CopyCOW copied outside its range")
	}
	// Exit of the child drops the mapcounts again.
	child.Zap(0, AddrLimit, nil)
	if e, _ := parent.Lookup(0); e.Page.MapCount() != 1 {
		t.Fatal("mapcount after child exit")
	}
}

// TestConcurrentLookup: lock-free readers race a writer that keeps flipping
// one slot between (a, writable) and (b, read-only), populates and zaps a
// range, and sets single pages. A reader must never see a torn PTE (a page
// with the other page's flags) nor a page at an address it was not installed
// at. Run with -race.
func TestConcurrentLookup(t *testing.T) {
	t.Parallel()
	tb := NewTable()
	slot := uint64(3 * mib)
	a, b := NewAnonPage(), NewAnonPage()
	tb.Set(slot, PTE{Page: a, Write: true})
	var done atomic.Bool
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for n := 0; !done.Load(); n++ {
				e, ok := tb.Lookup(slot)
				if !ok || (e.Page == a) != e.Write {
					t.Error("torn PTE")
					return
				}
				addr := uint64(n%1024) * PageSize
				if e, ok := tb.Lookup(addr); ok && addr != slot && e.Page.Index() != addr>>PageShift {
					t.Error("page at the wrong address")
					return
				}
				tb.Walk(0, 4*mib, func(addr uint64, e PTE) bool {
					if addr != slot && e.Page.Index() != addr>>PageShift {
						t.Error("Walk: page at the wrong address")
					}
					return true
				})
				if n%64 == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	for i := 0; i < 300; i++ {
		tb.Set(slot, PTE{Page: b})
		tb.Populate(0, 4*mib-PageSize*512, nil, i%2 == 0)
		tb.Set(slot, PTE{Page: a, Write: true})
		tb.Zap(0, 2*mib, nil)
		tb.Set(uint64(i%512)*PageSize, PTE{Page: NewAnonPageAt(uint64(i % 512))})
		tb.Zap(0, 2*mib, nil)
	}
	done.Store(true)
	wg.Wait()
}

func TestLookupDoesNotAllocate(t *testing.T) {
	tb := NewTable()
	tb.Populate(0, 4*mib, nil, true)
	if n := testing.AllocsPerRun(1000, func() {
		if _, ok := tb.Lookup(3*mib + 5); !ok {
			t.Fatal("miss")
		}
		tb.Lookup(100 * gib) // miss in an absent PUD
	}); n != 0 {
		t.Fatalf("Lookup allocates %v times", n)
	}
}

func TestPage(t *testing.T) {
	t.Parallel()
	p := NewAnonPage()
	if p.ByteAt(4095) != 0 || p.Materialized() {
		t.Fatal("fresh page")
	}
	p.SetByteAt(10, 0) // writing a zero to a zero page needs no storage
	if p.Materialized() {
		t.Fatal("zero write materialised the page")
	}
	p.SetByteAt(4095, 9)
	if !p.Materialized() || p.ByteAt(4095) != 9 || len(p.Bytes()) != PageSize {
		t.Fatal("write lost")
	}
	q := NewAnonPage()
	q.CopyFrom(p)
	p.SetByteAt(4095, 1)
	if q.ByteAt(4095) != 9 {
		t.Fatal("CopyFrom shares storage")
	}
	q.CopyFrom(NewAnonPage())
	if q.ByteAt(4095) != 0 {
		t.Fatal("CopyFrom of a zero page left old bytes")
	}
	z := NewAnonPage()
	z.CopyFrom(NewAnonPage())
	if z.Materialized() {
		t.Fatal("copying a zero page allocated storage")
	}
}

func TestCacheFillsOnce(t *testing.T) {
	t.Parallel()
	var fills atomic.Int32
	c := NewCache(func(i uint64, p *Page) {
		fills.Add(1)
		p.SetByteAt(1, byte(i+1))
	})
	got := make([]*Page, 8)
	var wg sync.WaitGroup
	for g := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[g] = c.Get(42)
		}()
	}
	wg.Wait()
	for _, p := range got {
		if p != got[0] {
			t.Fatal("two pages for one index")
		}
	}
	if fills.Load() != 1 || got[0].ByteAt(1) != 43 || got[0].IsAnon() || got[0].Index() != 42 {
		t.Fatalf("fills %d", fills.Load())
	}
	if c.Peek(7) != nil || c.Len() != 1 {
		t.Fatal("Peek created a page")
	}
}

// TestLookupNeverTorn: a writer flips one slot between (a, writable) and
// (b, read-only) as fast as it can while a reader looks it up; the reader
// must never see a page with the other page's flags. Without the table's
// seqcount the reader sees torn PTEs within a few thousand flips.
func TestLookupNeverTorn(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs two CPUs for the reader and the writer to overlap")
	}
	tb := NewTable()
	a, b := NewAnonPage(), NewAnonPage()
	tb.Set(0, PTE{Page: a, Write: true})
	var done atomic.Bool
	torn := make(chan PTE, 1)
	go func() {
		defer close(torn)
		for !done.Load() {
			if e, _ := tb.Lookup(0); (e.Page == a) != e.Write {
				torn <- e
				return
			}
		}
	}()
	for i := 0; i < 200000 && len(torn) == 0; i++ {
		tb.Set(0, PTE{Page: b})
		tb.Set(0, PTE{Page: a, Write: true})
	}
	done.Store(true)
	if e, ok := <-torn; ok {
		t.Fatalf("torn PTE: page a=%v write=%v", e.Page == a, e.Write)
	}
}

// TestConcurrentWritersSameTable: a munmap-like writer (Populate then Zap of
// one half of a PTE table, which frees the table whenever it ends up empty)
// races a fault-like writer setting and clearing pages in the other half, as
// a per-VMA-locked fault on one VMA runs during munmap of a neighbour in the
// same 2 MiB. No PTE may be lost to a freed table: at the end the faulting
// writer's last pages are all present, Resident matches a Walk, and every
// page is mapped once.
func TestConcurrentWritersSameTable(t *testing.T) {
	t.Parallel()
	tb := NewTable()
	base := uint64(6 * mib)
	const half = mib
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 300; i++ {
			tb.Populate(base, base+half, nil, true)
			tb.Zap(base, base+half, nil)
		}
	}()
	pages := make([]*Page, 2)
	for i := 0; i < 3000; i++ {
		k := i % len(pages)
		a := base + half + uint64(k)*PageSize
		if i%3 == 2 {
			tb.Clear(a)
			pages[k] = nil
			continue
		}
		p := NewAnonPageAt(a >> PageShift)
		tb.Set(a, PTE{Page: p, Write: true})
		pages[k] = p
	}
	wg.Wait()
	n := 0
	tb.Walk(0, AddrLimit, func(a uint64, e PTE) bool {
		n++
		if e.Page.MapCount() != 1 {
			t.Errorf("%#x mapped %d times", a, e.Page.MapCount())
		}
		return true
	})
	want := 0
	for k, p := range pages {
		a := base + half + uint64(k)*PageSize
		e, ok := tb.Lookup(a)
		if p == nil {
			if ok {
				t.Fatalf("%#x present after Clear", a)
			}
			continue
		}
		want++
		if !ok || e.Page != p {
			t.Fatalf("%#x: the fault's PTE was lost", a)
		}
	}
	if n != want || tb.Resident() != want {
		t.Fatalf("Walk found %d, Resident %d, want %d", n, tb.Resident(), want)
	}
}

// TestSetRetriesOnFreedTable drives the race TestConcurrentWritersSameTable
// can only hope for: Set finds the PTE table, then (in the hook, before Set
// takes the ptl) a Zap empties the table and frees it. Set must notice the
// table is dead and install into a new one.
func TestSetRetriesOnFreedTable(t *testing.T) {
	t.Parallel()
	tb := NewTable()
	tb.Set(8*mib, PTE{Page: NewAnonPage()})
	calls := 0
	tb.setLockingHook(func() {
		if calls++; calls == 1 {
			tb.Zap(8*mib, 8*mib+PageSize, nil)
			if _, _, ptes := tableCount(tb); ptes != 0 {
				t.Fatal("Zap did not free the emptied table")
			}
		}
	})
	p := NewAnonPage()
	tb.Set(8*mib+PageSize, PTE{Page: p})
	if calls != 2 {
		t.Fatalf("lockPTETable went round %d times, want 2", calls)
	}
	if e, ok := tb.Lookup(8*mib + PageSize); !ok || e.Page != p || tb.Resident() != 1 {
		t.Fatal("the PTE went into the freed table")
	}
}

func TestChangeProtection(t *testing.T) {
	t.Parallel()
	var tb Table
	const base = 0x7f0000000000
	tb.PopulateAnon(base, base+3*PageSize, 0, true)
	tb.PopulateAnon(base+5*PageSize, base+6*PageSize, 5, false)
	if n := tb.ChangeProtection(base+PageSize, base+6*PageSize, false, nil); n != 2 {
		t.Errorf("write-protect changed %d PTEs, want 2 (the read-only and the absent ones are left)", n)
	}
	for i, want := range []bool{true, false, false} {
		if p, _ := tb.Lookup(base + uint64(i)*PageSize); !p.Present() || p.Write != want {
			t.Errorf("page %d: present %v write %v, want present and write %v", i, p.Present(), p.Write, want)
		}
	}
	// Upgrading asks upgrade about each read-only PTE only.
	asked := 0
	n := tb.ChangeProtection(base, base+6*PageSize, true, func(p PTE) bool { asked++; return p.Page.Index() == 1 })
	if n != 1 || asked != 3 {
		t.Errorf("upgrade changed %d PTEs after %d questions, want 1 after 3", n, asked)
	}
	if p, _ := tb.Lookup(base + PageSize); !p.Write {
		t.Error("the approved PTE is not writable")
	}
	if tb.Resident() != 4 {
		t.Errorf("resident %d after changing protection, want 4", tb.Resident())
	}
}
