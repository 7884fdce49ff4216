package pgtable

import (
	"iter"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
)

// Table geometry: levels of 512 entries. The first 2^48 bytes are mapped
// by 4 levels (Table.pgd, then PUD, PMD and PTE tables), as with 4-level
// paging; with 5-level paging (la57) the PGD's first entry is that P4D and
// the others are P4D tables of the 2^48-byte ranges above (Table.upper),
// allocated on first use, up to a 57-bit space.
const (
	entriesShift = 9
	entries      = 1 << entriesShift
	pmdShift     = PageShift + entriesShift // one PTE table maps 2 MiB
	pudShift     = pmdShift + entriesShift  // one PMD table maps 1 GiB
	pgdShift     = pudShift + entriesShift  // one PUD table maps 512 GiB
	p4dShift     = pgdShift + entriesShift  // one P4D table maps 256 TiB
	// AddrLimit is the first address above the 57-bit space the tables map.
	AddrLimit = uint64(1) << (p4dShift + entriesShift)
)

// PTE is a page table entry. The zero PTE is "none" (not present).
type PTE struct {
	Page  *Page // the mapped page; nil for a none PTE
	Write bool  // _PAGE_RW
	Dirty bool  // _PAGE_DIRTY
	Young bool  // _PAGE_ACCESSED
}

// Present reports whether the PTE maps a page.
func (e PTE) Present() bool { return e.Page != nil }

// Flags of the packed form: flag 1<<k is kept in the bitmap pteTable.bits[k].
const (
	bitWrite = iota
	bitDirty
	bitYoung
	nflags
)

const (
	flagWrite = 1 << bitWrite
	flagDirty = 1 << bitDirty
	flagYoung = 1 << bitYoung
)

func (e PTE) flags() uint32 {
	var f uint32
	if e.Write {
		f |= flagWrite
	}
	if e.Dirty {
		f |= flagDirty
	}
	if e.Young {
		f |= flagYoung
	}
	return f
}

func mkPTE(p *Page, f uint32) PTE {
	if p == nil {
		return PTE{}
	}
	return PTE{Page: p, Write: f&flagWrite != 0, Dirty: f&flagDirty != 0, Young: f&flagYoung != 0}
}

// pteTable is a leaf table: 512 PTEs mapping 2 MiB.
type pteTable struct {
	// ptl is the split PTE lock. It serialises every change of page, flags,
	// present and dead. Lock order: mmap_lock → Table.mu → ptl.
	ptl sync.Mutex
	// seq is the table's seqcount: odd while a ptl holder changes slots.
	// Lock-free readers retry when it is odd or moved.
	seq     atomic.Uint32
	present int  // present PTEs; under ptl
	dead    bool // detached from its PMD by freeTables; under ptl
	page    [entries]atomic.Pointer[Page]
	// bits[k] is the bitmap of flag k (1<<k) over the 512 slots; a none
	// slot has no bits set.
	bits [nflags][entries / 64]atomic.Uint64
}

type pmdTable struct {
	e [entries]atomic.Pointer[pteTable]
	n int // non-nil entries; under Table.mu
}

type pudTable struct {
	e [entries]atomic.Pointer[pmdTable]
	n int // non-nil entries; under Table.mu
}

// p4dTable maps 2^48 bytes above the first 2^48 (5-level paging).
type p4dTable struct {
	e [entries]atomic.Pointer[pudTable]
	n int // non-nil entries; under Table.mu
}

// upperTable is the 5-level PGD without its first entry (Table.pgd).
type upperTable struct {
	e [entries]atomic.Pointer[p4dTable]
}

// Table is the page tables of one mm (mm->pgd and what hangs below it).
// The zero value is an empty table.
type Table struct {
	// mu is the kernel's mm->page_table_lock: it serialises allocating and
	// freeing PUD, PMD and PTE tables (never the PTEs themselves). Lock
	// order: mmap_lock → mu → ptl.
	mu sync.Mutex
	// pgd is the top level over the first 2^48 bytes, allocated with the
	// first table below it: the kernel's mm_alloc_pgd() allocates it with
	// the mm, but the model's forked children that never fault (seed 000's
	// forker forks about 100,000 a second) would then each make 4 KiB of
	// garbage. Written under mu.
	pgd atomic.Pointer[pgdTable]
	// upper holds the P4D tables above 2^48 (5-level paging), nil until
	// one is needed; written under mu.
	upper    atomic.Pointer[upperTable]
	resident atomic.Int64 // present PTEs (the mm's RSS in pages)

	// hooks are the table's test hooks, set only from export_test.go.
	hooks struct {
		// locking runs in lockPTETable between finding a table and
		// taking its ptl: the window in which freeTables may detach it.
		locking func()
	}
}

// pgdTable is the top level below 2^48.
type pgdTable struct {
	e [entries]atomic.Pointer[pudTable]
}

// pudSlot returns the entry pointing to the PUD table for addr without
// locks, or nil when the table above it is absent.
func (t *Table) pudSlot(addr uint64) *atomic.Pointer[pudTable] {
	if addr < 1<<p4dShift {
		g := t.pgd.Load()
		if g == nil {
			return nil
		}
		return &g.e[pgdIndex(addr)]
	}
	up := t.upper.Load()
	if up == nil {
		return nil
	}
	p4d := up.e[p4dIndex(addr)].Load()
	if p4d == nil {
		return nil
	}
	return &p4d.e[pgdIndex(addr)]
}

// allocPUDSlot is pudSlot allocating the P4D level, with the P4D table the
// entry is in (nil below 2^48). Caller holds t.mu.
func (t *Table) allocPUDSlot(addr uint64) (*atomic.Pointer[pudTable], *p4dTable) {
	if addr < 1<<p4dShift {
		g := t.pgd.Load()
		if g == nil {
			g = new(pgdTable)
			t.pgd.Store(g)
		}
		return &g.e[pgdIndex(addr)], nil
	}
	up := t.upper.Load()
	if up == nil {
		up = new(upperTable)
		t.upper.Store(up)
	}
	p4d := up.e[p4dIndex(addr)].Load()
	if p4d == nil {
		p4d = new(p4dTable)
		up.e[p4dIndex(addr)].Store(p4d)
	}
	return &p4d.e[pgdIndex(addr)], p4d
}

func p4dIndex(a uint64) uint64 { return a >> p4dShift & (entries - 1) }

func pgdIndex(a uint64) uint64 { return a >> pgdShift & (entries - 1) }
func pudIndex(a uint64) uint64 { return a >> pudShift & (entries - 1) }
func pmdIndex(a uint64) uint64 { return a >> pmdShift & (entries - 1) }
func pteIndex(a uint64) uint64 { return a >> PageShift & (entries - 1) }

// read returns slot i consistently with respect to ptl holders.
func (pt *pteTable) read(i uint64) PTE {
	for {
		s := pt.seq.Load()
		if s&1 == 0 {
			p := pt.page[i].Load()
			f := pt.flagsOf(i)
			if pt.seq.Load() == s {
				return mkPTE(p, f)
			}
		}
		runtime.Gosched()
	}
}

// flagsOf returns the flags of slot i.
func (pt *pteTable) flagsOf(i uint64) uint32 {
	w, b := i/64, i%64
	var f uint32
	for k := range nflags {
		f |= uint32(pt.bits[k][w].Load()>>b&1) << k
	}
	return f
}

// setFlags sets the flags of slot i; ptl held, inside writeBegin/writeEnd.
func (pt *pteTable) setFlags(i uint64, f uint32) {
	w, b := i/64, i%64
	for k := range nflags {
		old := pt.bits[k][w].Load()
		nw := old&^(1<<b) | uint64(f>>k&1)<<b
		if nw != old {
			pt.bits[k][w].Store(nw)
		}
	}
}

// updateFlags replaces, in flag word w, the bits in mask by those of val[k]
// for each flag k; ptl held, inside writeBegin/writeEnd.
func (pt *pteTable) updateFlags(w uint64, mask uint64, val *[nflags]uint64) {
	for k := range nflags {
		old := pt.bits[k][w].Load()
		if nw := old&^mask | val[k]&mask; nw != old {
			pt.bits[k][w].Store(nw)
		}
	}
}

// writeBegin and writeEnd bracket changes of slots; ptl must be held.
func (pt *pteTable) writeBegin() { pt.seq.Add(1) }
func (pt *pteTable) writeEnd()   { pt.seq.Add(1) }

// set changes slot i under ptl inside writeBegin/writeEnd, keeping the
// present count, and returns the old entry. It does not touch mapcounts.
func (pt *pteTable) set(i uint64, p *Page, f uint32) (old *Page, oldf uint32) {
	old = pt.page[i].Load()
	oldf = pt.flagsOf(i)
	if old == nil && p != nil {
		pt.present++
	} else if old != nil && p == nil {
		pt.present--
	}
	pt.page[i].Store(p)
	pt.setFlags(i, f)
	return old, oldf
}

// pteTableOf returns the leaf table for addr without locks, or nil.
func (t *Table) pteTableOf(addr uint64) *pteTable {
	_, _, pmd, _ := t.pmdOf(addr)
	if pmd == nil {
		return nil
	}
	return pmd.e[pmdIndex(addr)].Load()
}

// pmdOf returns, without locks, the levels above the leaf table for addr:
// the entry pointing to its PUD table, the PUD table and the PMD table.
// When a level is absent, pmd is nil and skip is the first address above
// addr that the absent level does not cover.
func (t *Table) pmdOf(addr uint64) (slot *atomic.Pointer[pudTable], pud *pudTable, pmd *pmdTable, skip uint64) {
	slot = t.pudSlot(addr)
	if slot == nil {
		return nil, nil, nil, next(addr, p4dShift)
	}
	pud = slot.Load()
	if pud == nil {
		return slot, nil, nil, next(addr, pgdShift)
	}
	pmd = pud.e[pudIndex(addr)].Load()
	if pmd == nil {
		return slot, pud, nil, next(addr, pudShift)
	}
	return slot, pud, pmd, 0
}

// allocPTETable returns the leaf table for addr, allocating missing levels
// under t.mu (__pte_alloc and friends).
func (t *Table) allocPTETable(addr uint64) *pteTable {
	if pt := t.pteTableOf(addr); pt != nil {
		return pt
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	slot, p4d := t.allocPUDSlot(addr)
	pud := slot.Load()
	if pud == nil {
		pud = new(pudTable)
		slot.Store(pud)
		if p4d != nil {
			p4d.n++
		}
	}
	pmd := pud.e[pudIndex(addr)].Load()
	if pmd == nil {
		pmd = new(pmdTable)
		pud.e[pudIndex(addr)].Store(pmd)
		pud.n++
	}
	pt := pmd.e[pmdIndex(addr)].Load()
	if pt == nil {
		pt = new(pteTable)
		pmd.e[pmdIndex(addr)].Store(pt)
		pmd.n++
	}
	return pt
}

// lockPTETable returns the live leaf table for addr with its ptl held,
// allocating it if needed (pte_alloc_map_lock).
func (t *Table) lockPTETable(addr uint64) *pteTable {
	for {
		pt := t.allocPTETable(addr)
		if t.hooks.locking != nil {
			t.hooks.locking()
		}
		pt.ptl.Lock()
		if !pt.dead {
			return pt
		}
		pt.ptl.Unlock()
	}
}

func checkAddr(addr uint64) {
	if addr >= AddrLimit {
		panic("pgtable: address beyond the 57-bit address space")
	}
}

// Lookup returns the PTE mapping addr without taking any lock; ok is false if
// none is present. It does not allocate. Mirrors the lockless walk of
// mm/gup.c:gup_fast_pte_range() (pgd/pud/pmd offsets, then ptep_get).
func (t *Table) Lookup(addr uint64) (PTE, bool) {
	if addr >= AddrLimit {
		return PTE{}, false
	}
	pt := t.pteTableOf(addr)
	if pt == nil {
		return PTE{}, false
	}
	e := pt.read(pteIndex(addr))
	return e, e.Page != nil
}

// Set installs pte at addr under the ptl, replacing what was there.
// Mirrors set_pte_at() under pte_alloc_map_lock().
// The new page's mapcount goes up and the old one's down; a PTE with a nil
// Page clears the slot.
func (t *Table) Set(addr uint64, pte PTE) {
	checkAddr(addr)
	pt := t.lockPTETable(addr)
	i := pteIndex(addr)
	t.replace(pt, i, mkPTE(pt.page[i].Load(), pt.flagsOf(i)), pte)
	pt.ptl.Unlock()
}

// replace changes slot i of pt from cur to nw with pt's ptl held, keeping
// mapcounts and Resident.
func (t *Table) replace(pt *pteTable, i uint64, cur, nw PTE) {
	pt.writeBegin()
	pt.set(i, nw.Page, nw.flags())
	pt.writeEnd()
	if nw.Page != nil {
		nw.Page.mapcount.Add(1)
		if cur.Page == nil {
			t.resident.Add(1)
		}
	}
	if cur.Page != nil {
		cur.Page.mapcount.Add(-1)
		if nw.Page == nil {
			t.resident.Add(-1)
		}
	}
}

// Clear removes the PTE at addr and returns it; the page's mapcount goes
// down. Mirrors ptep_get_and_clear() under the ptl.
func (t *Table) Clear(addr uint64) (PTE, bool) {
	checkAddr(addr)
	pt := t.pteTableOf(addr)
	if pt == nil {
		return PTE{}, false
	}
	pt.ptl.Lock()
	defer pt.ptl.Unlock()
	i := pteIndex(addr)
	if pt.page[i].Load() == nil {
		return PTE{}, false
	}
	pt.writeBegin()
	old, oldf := pt.set(i, nil, 0)
	pt.writeEnd()
	old.mapcount.Add(-1)
	t.resident.Add(-1)
	return mkPTE(old, oldf), true
}

// Update runs fn on the PTE at addr with the ptl held and, if fn returns
// true, installs the PTE it returns (a nil Page clears the slot); mapcounts
// follow as in Set. fn must not call methods of t. This is the fault
// handler's read-modify-write: mirrors the pte_offset_map_lock() section of
// mm/memory.c:do_anonymous_page() / wp_page_copy().
func (t *Table) Update(addr uint64, fn func(old PTE, ok bool) (PTE, bool)) {
	checkAddr(addr)
	pt := t.lockPTETable(addr)
	defer pt.ptl.Unlock()
	i := pteIndex(addr)
	cur := mkPTE(pt.page[i].Load(), pt.flagsOf(i))
	if nw, set := fn(cur, cur.Page != nil); set {
		t.replace(pt, i, cur, nw)
	}
}

// Resident returns the number of present PTEs.
func (t *Table) Resident() int { return int(t.resident.Load()) }

// tables calls fn for every existing leaf table overlapping [start,end),
// with the part of the range it covers, skipping absent upper levels.
// It takes no lock.
func (t *Table) tables(start, end uint64, fn func(pt *pteTable, s, e uint64) bool) {
	end = min(end, AddrLimit)
	for a := start; a < end; {
		_, _, pmd, skip := t.pmdOf(a)
		if pmd == nil {
			a = skip
			continue
		}
		n := next(a, pmdShift)
		if pt := pmd.e[pmdIndex(a)].Load(); pt != nil {
			if !fn(pt, a, min(n, end)) {
				return
			}
		}
		a = n
	}
}

// presentPages iterates, in address order, over the present PTEs of pt in
// [s,e) (within pt's range): each one's address and page. It stops once pt
// has no present PTE left, so the loop may clear the entries it is given.
// Caller holds pt.ptl.
func (pt *pteTable) presentPages(s, e uint64) iter.Seq2[uint64, *Page] {
	return func(yield func(uint64, *Page) bool) {
		for a := s; a < e && pt.present > 0; a += PageSize {
			if p := pt.page[pteIndex(a)].Load(); p != nil && !yield(a, p) {
				return
			}
		}
	}
}

// next returns the first address above a aligned to 1<<shift.
func next(a uint64, shift uint) uint64 { return (a>>shift + 1) << shift }

// Walk calls fn for each present PTE in [start,end) in address order, reading
// each without a lock, until fn returns false.
func (t *Table) Walk(start, end uint64, fn func(addr uint64, pte PTE) bool) {
	t.tables(start, end, func(pt *pteTable, s, e uint64) bool {
		for a := s; a < e; a += PageSize {
			i := pteIndex(a)
			if pt.page[i].Load() == nil {
				continue
			}
			if p := pt.read(i); p.Page != nil && !fn(a, p) {
				return false
			}
		}
		return true
	})
}

// Zap clears every PTE in [start,end). Mirrors mm/memory.c:zap_pte_range()
// and, for the tables, mm/mmap.c:free_pgtables().
// For each present one it drops the page's mapcount and then calls fn (if
// not nil) with the ptl held; fn must not call methods of t. Leaf tables left
// empty, and upper tables left empty by that, are freed. It returns how
// many present PTEs it cleared.
func (t *Table) Zap(start, end uint64, fn func(addr uint64, pte PTE)) int {
	zapped := int64(0)
	t.writePresentTables(start, end, func(pt *pteTable, s, e uint64) {
		for a, p := range pt.presentPages(s, e) {
			i := pteIndex(a)
			var f uint32
			if fn != nil {
				f = pt.flagsOf(i)
			}
			pt.page[i].Store(nil)
			pt.present--
			p.mapcount.Add(-1)
			zapped++
			if fn != nil {
				fn(a, mkPTE(p, f))
			}
		}
		var none [nflags]uint64
		from, to := pteIndex(s), pteIndex(e-1)+1
		for w := from / 64; w*64 < to; w++ {
			pt.updateFlags(w, wordMask(w, from, to), &none)
		}
	})
	t.resident.Add(-zapped)
	t.freeTables(start, end)
	return int(zapped)
}

// writePresentTables calls fn for each leaf table of [start,end) that has
// present PTEs, with the part of the range it covers, holding the table's
// ptl and inside its write section: the frame of the kernel's PTE-range
// loops (pte_offset_map_lock ... pte_unmap_unlock).
func (t *Table) writePresentTables(start, end uint64, fn func(pt *pteTable, s, e uint64)) {
	t.tables(start, end, func(pt *pteTable, s, e uint64) bool {
		pt.ptl.Lock()
		if pt.present > 0 {
			pt.writeBegin()
			fn(pt, s, e)
			pt.writeEnd()
		}
		pt.ptl.Unlock()
		return true
	})
}

// ChangeProtection sets the write bit of every present PTE in [start,end):
// cleared when write is false; when write is true, set where upgrade
// approves the PTE, left as it is elsewhere. It returns how many PTEs it
// changed. Mirrors mm/mprotect.c:change_pte_range(): PTE by PTE under the
// table's ptl (the kernel's ptep_modify_prot_start/commit pair per entry),
// upgrade standing for the MM_CP_TRY_CHANGE_WRITABLE check
// can_change_pte_writable(). fn must not call methods of t.
func (t *Table) ChangeProtection(start, end uint64, write bool, upgrade func(PTE) bool) int {
	changed := 0
	t.writePresentTables(start, end, func(pt *pteTable, s, e uint64) {
		for a, p := range pt.presentPages(s, e) {
			i := pteIndex(a)
			f := pt.flagsOf(i)
			nf := f &^ flagWrite
			if write && (f&flagWrite != 0 || upgrade != nil && upgrade(mkPTE(p, f))) {
				nf |= flagWrite
			}
			if nf != f {
				pt.setFlags(i, nf)
				changed++
			}
		}
	})
	return changed
}

// wordMask returns the bits of flag word w that belong to slots [from,to).
func wordMask(w, from, to uint64) uint64 {
	lo, hi := max(from, w*64)-w*64, min(to, w*64+64)-w*64
	if hi <= lo {
		return 0
	}
	return ^uint64(0) >> (64 - (hi - lo)) << lo
}

// freeTables detaches the empty leaf tables overlapping [start,end) and the
// upper tables that become empty (free_pgd_range).
func (t *Table) freeTables(start, end uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	end = min(end, AddrLimit)
	for a := start; a < end; {
		slot, pud, pmd, skip := t.pmdOf(a)
		if pmd == nil {
			a = skip
			continue
		}
		ui := pudIndex(a)
		mi := pmdIndex(a)
		if pt := pmd.e[mi].Load(); pt != nil {
			pt.ptl.Lock()
			if pt.present == 0 {
				pt.dead = true
				pmd.e[mi].Store(nil)
				pmd.n--
			}
			pt.ptl.Unlock()
		}
		a = next(a, pmdShift)
		if pmd.n == 0 {
			pud.e[ui].Store(nil)
			pud.n--
			a = max(a, next(a-1, pudShift))
		}
		if pud.n == 0 {
			slot.Store(nil)
			a = max(a, next(a-1, pgdShift))
			if a-1 >= 1<<p4dShift {
				up := t.upper.Load()
				p4d := up.e[p4dIndex(a-1)].Load()
				if p4d.n--; p4d.n == 0 {
					up.e[p4dIndex(a-1)].Store(nil)
					a = max(a, next(a-1, p4dShift))
				}
			}
		}
	}
}

// Move moves the PTEs of [oldStart,oldEnd) to the same offsets from newStart.
// Mirrors mm/mremap.c:move_page_tables(), PTE by PTE (move_ptes). The ranges
// must not overlap and the destination must hold no PTEs; mapcounts and
// Resident do not change. The caller holds the mmap write lock.
func (t *Table) Move(oldStart, oldEnd, newStart uint64) {
	if oldEnd <= oldStart {
		return
	}
	checkAddr(newStart + (oldEnd - oldStart) - 1)
	t.tables(oldStart, oldEnd, func(src *pteTable, s, e uint64) bool {
		src.ptl.Lock()
		empty := src.present == 0 || src.dead
		src.ptl.Unlock()
		if empty {
			return true // nothing to move: allocate no destination table
		}
		for s < e {
			d := newStart + (s - oldStart)
			// The destination table covers [d, next(d)); do that part.
			ce := min(e, s+(next(d, pmdShift)-d))
			// Allocate the destination before taking any ptl (t.mu comes
			// first), then lock old before new as move_ptes does.
			dst := t.allocPTETable(d)
			src.ptl.Lock()
			if dst != src {
				dst.ptl.Lock()
			}
			if src.dead || dst.dead {
				if dst != src {
					dst.ptl.Unlock()
				}
				src.ptl.Unlock()
				if src.dead {
					return true // freed, so empty
				}
				continue
			}
			src.writeBegin()
			if dst != src {
				dst.writeBegin()
			}
			for a, p := range src.presentPages(s, ce) {
				i := pteIndex(a)
				_, f := src.set(i, nil, 0)
				dst.set(pteIndex(d+(a-s)), p, f)
			}
			if dst != src {
				dst.writeEnd()
			}
			src.writeEnd()
			if dst != src {
				dst.ptl.Unlock()
			}
			src.ptl.Unlock()
			s = ce
		}
		return true
	})
	t.freeTables(oldStart, oldEnd)
}

// CopyCOW copies the PTEs of [start,end) into dst at the same addresses
// (copy_page_range for fork). Anonymous pages end up shared read-only: the
// write bit is cleared in t as well as in dst, so the first write in either
// mm breaks COW. Other (page-cache, shared-mapping) PTEs are copied as they
// are, but clean in dst. Every copy is old (not young) and raises its page's
// mapcount. The caller chooses which ranges need copying (vma_needs_copy) and
// holds both mmap write locks. It returns the present PTEs it copied, each a
// copy_present_pte() of copy_pte_range(). Mirrors
// mm/memory.c:__copy_present_ptes().
func (t *Table) CopyCOW(dst *Table, start, end uint64) int {
	copied, n := int64(0), 0
	t.tables(start, end, func(src *pteTable, s, e uint64) bool {
		src.ptl.Lock()
		empty := src.present == 0 || src.dead
		src.ptl.Unlock()
		if empty {
			return true
		}
		dp := dst.lockPTETable(s) // dst ptl, then src ptl (copy_pte_range)
		src.ptl.Lock()
		if src.dead { // freed meanwhile, so empty
			src.ptl.Unlock()
			dp.ptl.Unlock()
			return true
		}
		src.writeBegin()
		dp.writeBegin()
		from, to := pteIndex(s), pteIndex(e-1)+1
		for w := from / 64; w*64 < to; w++ {
			var present, anon uint64
			for i := max(from, w*64); i < min(to, w*64+64); i++ {
				p := src.page[i].Load()
				if p == nil {
					continue
				}
				n++
				bit := uint64(1) << (i % 64)
				present |= bit
				if p.anon {
					anon |= bit
				}
				if old := dp.page[i].Swap(p); old != nil {
					old.mapcount.Add(-1)
				} else {
					dp.present++
					copied++
				}
				p.mapcount.Add(1)
			}
			if present == 0 {
				continue
			}
			var val [nflags]uint64
			for k := range nflags {
				val[k] = src.bits[k][w].Load()
			}
			// is_cow_mapping && pte_write: write-protect both.
			if wp := val[bitWrite] & anon; wp != 0 {
				val[bitWrite] &^= wp
				src.bits[bitWrite][w].Store(val[bitWrite])
			}
			val[bitDirty] &^= present &^ anon // shared: clean in the child
			val[bitYoung] = 0                 // pte_mkold
			dp.updateFlags(w, present, &val)
		}
		dp.writeEnd()
		src.writeEnd()
		src.ptl.Unlock()
		dp.ptl.Unlock()
		return true
	})
	dst.resident.Add(copied)
	return n
}

// Populate installs a page at every none PTE in [start,end), as faulting the
// range in would. Mirrors mm/gup.c:populate_vma_page_range() for
// MAP_POPULATE (each page as do_anonymous_page or filemap_fault); present PTEs are
// left alone. newPage supplies the page for an address (a page-cache page for
// file mappings, or a fresh anonymous page) and is called without any lock
// held. With a nil newPage, Populate allocates the anonymous pages itself, one
// slab per PTE table, with index addr>>PageShift and their 4 KiB deferred
// until first written. With write the PTEs are writable and dirty (a write
// fault); all are young.
func (t *Table) Populate(start, end uint64, newPage func(addr uint64) *Page, write bool) {
	t.populate(start, end, newPage, start>>PageShift, write)
}

// PopulateAnon is Populate of fresh anonymous pages (a nil newPage) whose
// index is that of an anonymous VMA with vm_pgoff: the page at start gets
// index, the next index+1, and so on (linear_page_index()). It matters after
// mremap has moved a VMA, whose vm_pgoff no longer equals vm_start>>PageShift.
func (t *Table) PopulateAnon(start, end, index uint64, write bool) {
	t.populate(start, end, nil, index, write)
}

func (t *Table) populate(start, end uint64, newPage func(addr uint64) *Page, index uint64, write bool) {
	if end <= start {
		return
	}
	checkAddr(end - 1)
	var val [nflags]uint64
	val[bitYoung] = ^uint64(0)
	if write {
		val[bitWrite], val[bitDirty] = ^uint64(0), ^uint64(0)
	}
	var pages *[entries]*Page
	if newPage != nil {
		pages = new([entries]*Page)
	}
	installed := 0
	for s := start; s < end; {
		e := min(next(s, pmdShift), end)
		from, to := pteIndex(s), pteIndex(e-1)+1
		var pt *pteTable
		var slab []Page
		if newPage == nil {
			pt = t.lockPTETable(s)
			need := int(to - from)
			if pt.present > 0 {
				for i := from; i < to; i++ {
					if pt.page[i].Load() != nil {
						need--
					}
				}
			}
			slab = make([]Page, need) // zero Pages: anon below, mapped once
		} else {
			// Get the pages for the slots that look empty before taking
			// the ptl, as the fault path gets the folio first.
			pt = t.allocPTETable(s)
			for i := from; i < to; i++ {
				if pt.page[i].Load() == nil {
					pages[i] = newPage(s + (i-from)<<PageShift)
				}
			}
			if lp := t.lockPTETable(s); lp != pt {
				lp.ptl.Unlock() // the table was freed and replaced: again
				clear(pages[:])
				continue
			}
		}
		pt.writeBegin()
		base := index + (s-start)>>PageShift - from
		for w := from / 64; w*64 < to; w++ {
			var mask uint64
			for i := max(from, w*64); i < min(to, w*64+64); i++ {
				if pt.page[i].Load() != nil {
					continue
				}
				var p *Page
				if slab != nil {
					p = &slab[0]
					slab = slab[1:]
					p.anon = true
					p.index = base + i
				} else if p = pages[i]; p == nil {
					continue
				} else {
					p.mapcount.Add(1)
				}
				pt.page[i].Store(p)
				mask |= 1 << (i % 64)
			}
			if mask != 0 {
				pt.updateFlags(w, mask, &val)
				n := bits.OnesCount64(mask)
				pt.present += n
				installed += n
			}
		}
		pt.writeEnd()
		pt.ptl.Unlock()
		if pages != nil {
			clear(pages[from:to])
		}
		s = e
	}
	t.resident.Add(int64(installed))
}

// NewTable returns an empty page table (pgd_alloc); the zero Table is too.
func NewTable() *Table { return new(Table) }
