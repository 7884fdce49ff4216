// Package pgtable is the model's memory below the VMAs: pages (struct page /
// folio), x86-64 4-level page tables (PGD, PUD, PMD, PTE tables of 512
// entries, 4 KiB pages, 48-bit addresses) and the page cache of a file.
//
// # Concurrency
//
// A PTE slot is read without any lock (Lookup, Walk), as the hardware walker,
// GUP-fast and the model CPU's instruction fetch read page tables. Every change
// of a leaf (PTE) table is made under that table's own lock, its ptl (the
// kernel's split PTE lock), inside a per-table seqcount, so a lock-free reader
// always sees a consistent (page, flags) pair: the kernel gets that from a
// single-word PTE; the model's PTE is a pointer plus flags.
//
// Upper-level tables are allocated and freed under Table.mu (the kernel's
// mm->page_table_lock). Freeing an empty PTE table marks it dead under its
// ptl before detaching it, so a writer that found the table just before it was
// detached notices after taking the ptl and walks again (as
// pte_offset_map_lock rechecks the PMD). Readers that still hold a detached
// table see only empty slots; Go's garbage collector frees it after them (the
// kernel frees page tables after an RCU grace period).
//
// Lock order: mmap_lock → Table.mu (page_table_lock) → ptl. When two ptls are
// held, the destination table's comes first for CopyCOW (copy_pte_range locks
// dst then src) and the source's first for Move (move_ptes); both run under
// the mmap write lock, which keeps them from meeting each other.
//
// # Memory
//
// A populated page costs about 45 bytes: its PTE slot (a pointer, and three
// bits in the table's flag bitmaps) and a 32-byte Page. Pages installed by Populate for anonymous
// memory are allocated as one slab per PTE table, and the 4 KiB of an
// anonymous page are not allocated until something writes to it (the kernel
// maps the shared zero page for read faults; the model defers even for write
// faults, since unwritten memory reads as zeroes either way). Populate still
// installs every PTE and every Page: only the byte storage is deferred. One
// Page of a slab that stays mapped keeps its whole slab alive.
package pgtable

import (
	"sync"
	"sync/atomic"
)

// Page geometry (x86-64 4 KiB pages).
const (
	PageShift = 12
	PageSize  = 1 << PageShift
)

// Page is the model's struct page / folio of one 4 KiB page.
//
// (ByteAt and SetByteAt are named so, not ReadByte and WriteByte, because go
// vet reserves those names for io.ByteReader and io.ByteWriter.)
//
// Contents are plain memory: ByteAt, SetByteAt and Bytes do no locking, so,
// as with real memory, concurrent writes and reads of the same page must be
// ordered by the caller (the model's lock discipline) to be race-free.
type Page struct {
	data     atomic.Pointer[[PageSize]byte] // nil until first written: reads as zeroes
	mapcount atomic.Int32                   // _mapcount: PTEs mapping this page minus one (maintained by Table)
	anon     bool                           // anonymous (PageAnon) or page cache; fixed at creation
	index    uint64                         // folio->index: offset in pages in the file, or the anon linear index
	cache    *Cache                         // folio->mapping for page-cache pages; nil for anon
}

// The mapcount field holds the number of mapping PTEs minus one, as the
// kernel's page->_mapcount starts at -1 for an unmapped page. The constructors
// set it to -1; a zero Page is therefore "mapped once", which is what lets
// Populate hand out zeroed slabs of pages that are about to be mapped without
// one atomic store per page. Make Pages only with the constructors.

// NewAnonPage returns a fresh zero-filled anonymous page whose 4 KiB are not
// yet allocated.
func NewAnonPage() *Page { return NewAnonPageAt(0) }

// NewAnonPageAt is NewAnonPage with the page's linear index (the anon
// folio->index, linear_page_index() of the faulting address in its VMA).
func NewAnonPageAt(index uint64) *Page {
	p := &Page{anon: true, index: index}
	p.mapcount.Store(-1)
	return p
}

// IsAnon reports whether the page is anonymous (not in a page cache).
func (p *Page) IsAnon() bool { return p.anon }

// Index is the page's offset in pages within its file, or its anon index.
func (p *Page) Index() uint64 { return p.index }

// Mapping returns the page cache the page belongs to, or nil for anon pages.
func (p *Page) Mapping() *Cache { return p.cache }

// MapCount is the number of PTEs, in all page tables, that map the page
// (folio_mapcount).
func (p *Page) MapCount() int { return int(p.mapcount.Load()) + 1 }

// Materialized reports whether the page's 4 KiB of storage exist (it has been
// written to, or Bytes was called).
func (p *Page) Materialized() bool { return p.data.Load() != nil }

// ByteAt returns the byte at off. A page never written reads 0 without
// allocating.
func (p *Page) ByteAt(off int) byte {
	d := p.data.Load()
	if d == nil {
		return 0
	}
	return d[off]
}

// SetByteAt stores b at off, allocating the page's storage on first write.
func (p *Page) SetByteAt(off int, b byte) {
	d := p.data.Load()
	if d == nil {
		if b == 0 {
			return
		}
		d = p.materialize()
	}
	d[off] = b
}

// Bytes returns the page's 4096 bytes, allocating them if the page was never
// written. Writes through the slice change the page.
func (p *Page) Bytes() []byte {
	d := p.data.Load()
	if d == nil {
		d = p.materialize()
	}
	return d[:]
}

func (p *Page) materialize() *[PageSize]byte {
	n := new([PageSize]byte)
	if p.data.CompareAndSwap(nil, n) {
		return n
	}
	return p.data.Load()
}

// CopyFrom makes p's contents equal to src's. Mirrors copy_user_highpage()
// (the copy of a COW break). Copying a never-written page leaves p unallocated if
// it was unallocated.
func (p *Page) CopyFrom(src *Page) {
	s := src.data.Load()
	if s == nil {
		if d := p.data.Load(); d != nil {
			clear(d[:])
		}
		return
	}
	d := p.data.Load()
	if d == nil {
		d = p.materialize()
	}
	*d = *s
}

// Cache is the page cache of one file (address_space->i_pages): its pages by
// index, each created and filled once, on first access.
type Cache struct {
	mu    sync.Mutex // protects pages; taken after any ptl is released (never inside one)
	pages map[uint64]*Page
	fill  func(index uint64, p *Page)
}

// NewCache returns an empty page cache whose pages are filled by fill (which
// may be nil for all-zero pages) the first time they are asked for.
func NewCache(fill func(index uint64, p *Page)) *Cache {
	return &Cache{pages: make(map[uint64]*Page), fill: fill}
}

// Get returns the page at index, creating and filling it on first access.
// Mirrors mm/filemap.c:filemap_get_folio() with FGP_CREAT and the read that
// fills a new folio. fill runs once per page, under the
// cache's lock.
func (c *Cache) Get(index uint64) *Page {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pages[index]
	if p == nil {
		p = &Page{index: index, cache: c}
		p.mapcount.Store(-1)
		if c.fill != nil {
			c.fill(index, p)
		}
		c.pages[index] = p
	}
	return p
}

// Peek returns the page at index if it is cached, without creating it.
func (c *Cache) Peek(index uint64) *Page {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pages[index]
}

// Len returns the number of cached pages.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pages)
}
