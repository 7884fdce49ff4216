// Package mt is the model's maple tree: an ordered map of non-overlapping
// half-open address ranges [start,end) to values, readable without any lock.
//
// It plays the role of lib/maple_tree.c in an mm_struct created with
// MT_FLAGS_USE_RCU | MT_FLAGS_LOCK_EXTERN: writers (Store, Erase) are
// serialised by an external lock that the caller holds (the mmap write lock),
// and readers walk the tree with no lock at all.
//
// The tree is a persistent (path-copying) B+tree. A node is never modified
// after it has been published; a write copies the nodes on the path from the
// root to the leaf it changes and publishes the new root with one atomic
// pointer store. A reader that loaded the old root keeps walking the old,
// still complete tree, so every reader sees, for each write, either the tree
// before it or the tree after it, never a mixture. Go's garbage collector
// stands in for RCU-deferred freeing (the kernel's ma_free_rcu): an old node is
// reclaimed only when no reader can reach it any more.
//
// Because nodes are immutable, Clone is O(1) (the whole tree is shared, as
// __mt_dup shares nothing but copies everything in the kernel) and later
// writes on either tree copy only their own paths.
package mt

import (
	"iter"
	"sync/atomic"
)

// Range is a half-open address range [Start, End).
type Range struct{ Start, End uint64 }

// maxEntries is the fan-out of a node (maple_range_64 nodes hold 16 slots).
const maxEntries = 16

// minEntries is the fill below which a non-root node is rebalanced with a
// sibling after an erase.
const minEntries = maxEntries / 4

// node is a leaf (ranges and values) or an internal node (children). In an
// internal node start[i] and end[i] are the start of the first and the end of
// the last range below kid[i], so one search routine serves both kinds.
// A node is immutable once reachable from a published root.
type node[T any] struct {
	n     int // slots in use
	leaf  bool
	size  int // ranges in this subtree
	start [maxEntries]uint64
	end   [maxEntries]uint64
	kid   [maxEntries]*node[T]
	val   [maxEntries]*T
}

// Tree is an RCU-readable range tree. The zero value is an empty tree.
//
// Store and Erase must be serialised by the caller (the mmap write lock in the
// model); all read methods may run concurrently with them and with each other.
type Tree[T any] struct {
	root atomic.Pointer[node[T]] // published root; nil when empty
}

// Snapshot is an immutable view of a tree at one instant: what an RCU reader
// holds between rcu_read_lock and rcu_read_unlock. Its zero value is empty.
type Snapshot[T any] struct {
	root *node[T]
}

// Snapshot returns the current tree as an immutable view.
func (t *Tree[T]) Snapshot() Snapshot[T] { return Snapshot[T]{t.root.Load()} }

// Clone returns a new tree holding the same ranges, sharing every node with t.
// It costs O(1); later writes to either tree copy only the paths they change.
// The caller must hold the writer lock of t (as dup_mmap holds the old mm's
// mmap write lock).
func (t *Tree[T]) Clone() *Tree[T] {
	c := new(Tree[T])
	c.root.Store(t.root.Load())
	return c
}

// Load returns the value of the range containing addr, or nil.
// Mirrors include/linux/mm.h:vma_lookup() (mtree_load).
func (t *Tree[T]) Load(addr uint64) *T { return Snapshot[T]{t.root.Load()}.Load(addr) }

// Find returns the first range with end > addr (the range containing addr or
// the next one above it), or v == nil if there is none.
// Mirrors mm/mmap.c:find_vma().
func (t *Tree[T]) Find(addr uint64) (start, end uint64, v *T) {
	return Snapshot[T]{t.root.Load()}.Find(addr)
}

// Prev returns the last range with start < addr, or v == nil if there is none.
// With addr = vma.start it gives vma_prev().
func (t *Tree[T]) Prev(addr uint64) (start, end uint64, v *T) {
	return Snapshot[T]{t.root.Load()}.Prev(addr)
}

// Len returns the number of ranges (mm->map_count when storing VMAs).
func (t *Tree[T]) Len() int { return Snapshot[T]{t.root.Load()}.Len() }

// All yields every range in address order from one snapshot.
func (t *Tree[T]) All() iter.Seq2[Range, *T] { return Snapshot[T]{t.root.Load()}.All() }

// From yields the ranges with end > addr in address order from one snapshot
// (for_each_vma starting at addr).
func (t *Tree[T]) From(addr uint64) iter.Seq2[Range, *T] {
	return Snapshot[T]{t.root.Load()}.From(addr)
}

// findSlot returns the first slot i of nd with nd.end[i] > addr, or nd.n.
func (nd *node[T]) findSlot(addr uint64) int {
	lo, hi := 0, nd.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if nd.end[m] > addr {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// prevSlot returns the last slot i of nd with nd.start[i] < addr, or -1.
func (nd *node[T]) prevSlot(addr uint64) int {
	lo, hi := 0, nd.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if nd.start[m] < addr {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1
}

// Load returns the value of the range containing addr, or nil.
func (s Snapshot[T]) Load(addr uint64) *T {
	nd := s.root
	if nd == nil {
		return nil
	}
	for {
		i := nd.findSlot(addr)
		if i == nd.n || nd.start[i] > addr {
			return nil
		}
		if nd.leaf {
			return nd.val[i]
		}
		nd = nd.kid[i]
	}
}

// Find returns the first range with end > addr, or v == nil.
func (s Snapshot[T]) Find(addr uint64) (start, end uint64, v *T) {
	nd := s.root
	if nd == nil {
		return 0, 0, nil
	}
	for {
		i := nd.findSlot(addr)
		if i == nd.n {
			return 0, 0, nil
		}
		if nd.leaf {
			return nd.start[i], nd.end[i], nd.val[i]
		}
		nd = nd.kid[i]
	}
}

// Prev returns the last range with start < addr, or v == nil.
func (s Snapshot[T]) Prev(addr uint64) (start, end uint64, v *T) {
	nd := s.root
	if nd == nil {
		return 0, 0, nil
	}
	for {
		i := nd.prevSlot(addr)
		if i < 0 {
			return 0, 0, nil
		}
		if nd.leaf {
			return nd.start[i], nd.end[i], nd.val[i]
		}
		nd = nd.kid[i]
	}
}

// Len returns the number of ranges in the snapshot.
func (s Snapshot[T]) Len() int {
	if s.root == nil {
		return 0
	}
	return s.root.size
}

// All yields every range in address order.
func (s Snapshot[T]) All() iter.Seq2[Range, *T] { return s.From(0) }

// From yields the ranges with end > addr in address order.
func (s Snapshot[T]) From(addr uint64) iter.Seq2[Range, *T] {
	return func(yield func(Range, *T) bool) {
		if s.root != nil {
			walkFrom(s.root, addr, yield)
		}
	}
}

func walkFrom[T any](nd *node[T], addr uint64, yield func(Range, *T) bool) bool {
	i := 0
	if addr != 0 {
		i = nd.findSlot(addr)
	}
	if nd.leaf {
		for ; i < nd.n; i++ {
			if !yield(Range{nd.start[i], nd.end[i]}, nd.val[i]) {
				return false
			}
		}
		return true
	}
	if i < nd.n {
		if !walkFrom(nd.kid[i], addr, yield) {
			return false
		}
		i++
	}
	for ; i < nd.n; i++ {
		if !walkFrom(nd.kid[i], 0, yield) {
			return false
		}
	}
	return true
}

// Store adds the range [start,end) with value v. The caller guarantees that
// start < end and that the range overlaps nothing stored (erase first), and
// holds the writer lock. Mirrors the effect of mas_store_gfp() on an empty
// range.
func (t *Tree[T]) Store(start, end uint64, v *T) {
	if start >= end {
		panic("mt: Store of an empty range")
	}
	root := t.root.Load()
	if root == nil {
		nd := &node[T]{n: 1, leaf: true, size: 1}
		nd.start[0], nd.end[0], nd.val[0] = start, end, v
		t.root.Store(nd)
		return
	}
	l, r := insert(root, start, end, v)
	if r != nil {
		nr := &node[T]{n: 2, size: l.size + r.size}
		nr.setKid(0, l)
		nr.setKid(1, r)
		l = nr
	}
	t.root.Store(l)
}

func (nd *node[T]) setKid(i int, k *node[T]) {
	nd.kid[i] = k
	nd.start[i] = k.start[0]
	nd.end[i] = k.end[k.n-1]
}

// insert returns a copy of nd with the range added; if the copy overflowed it
// is split and the upper half is returned in r.
func insert[T any](nd *node[T], start, end uint64, v *T) (l, r *node[T]) {
	c := new(node[T])
	*c = *nd
	c.size++
	i := nd.findSlot(start)
	if nd.leaf {
		if i < nd.n && nd.start[i] < end {
			panic("mt: Store of a range that overlaps a stored one")
		}
		c.insertSlot(i)
		c.start[i], c.end[i], c.val[i] = start, end, v
	} else {
		if i == nd.n {
			i--
		}
		kl, kr := insert(nd.kid[i], start, end, v)
		c.setKid(i, kl)
		if kr != nil {
			c.insertSlot(i + 1)
			c.setKid(i+1, kr)
		}
	}
	if c.n <= maxEntries-1 {
		return c, nil
	}
	return c.split()
}

// insertSlot opens slot i, shifting the later slots up.
func (nd *node[T]) insertSlot(i int) {
	n := nd.n
	copy(nd.start[i+1:n+1], nd.start[i:n])
	copy(nd.end[i+1:n+1], nd.end[i:n])
	if nd.leaf {
		copy(nd.val[i+1:n+1], nd.val[i:n])
	} else {
		copy(nd.kid[i+1:n+1], nd.kid[i:n])
	}
	nd.n++
}

// removeSlot closes slot i, shifting the later slots down.
func (nd *node[T]) removeSlot(i int) {
	n := nd.n
	copy(nd.start[i:n-1], nd.start[i+1:n])
	copy(nd.end[i:n-1], nd.end[i+1:n])
	copy(nd.val[i:n-1], nd.val[i+1:n])
	copy(nd.kid[i:n-1], nd.kid[i+1:n])
	nd.val[n-1], nd.kid[n-1] = nil, nil
	nd.n--
}

// split divides a full, unpublished node into two halves.
func (nd *node[T]) split() (l, r *node[T]) {
	h := nd.n / 2
	r = &node[T]{leaf: nd.leaf}
	r.n = nd.n - h
	copy(r.start[:], nd.start[h:nd.n])
	copy(r.end[:], nd.end[h:nd.n])
	copy(r.val[:], nd.val[h:nd.n])
	copy(r.kid[:], nd.kid[h:nd.n])
	for i := h; i < nd.n; i++ {
		nd.val[i], nd.kid[i] = nil, nil
	}
	nd.n = h
	nd.fixSize()
	r.fixSize()
	return nd, r
}

func (nd *node[T]) fixSize() {
	if nd.leaf {
		nd.size = nd.n
		return
	}
	s := 0
	for i := 0; i < nd.n; i++ {
		s += nd.kid[i].size
	}
	nd.size = s
}

// Erase removes the range that starts at start, if there is one. The caller
// holds the writer lock. Mirrors the effect of mas_erase() / vma_iter_clear().
func (t *Tree[T]) Erase(start uint64) {
	root := t.root.Load()
	if root == nil {
		return
	}
	c, ok := erase(root, start)
	if !ok {
		return
	}
	for c.n == 1 && !c.leaf {
		c = c.kid[0]
	}
	if c.n == 0 {
		c = nil
	}
	t.root.Store(c)
}

// erase returns a copy of nd without the range starting at start; ok is false
// (and nothing was copied) if there is no such range. The copy may be
// underfull; the caller rebalances it.
func erase[T any](nd *node[T], start uint64) (*node[T], bool) {
	i := nd.findSlot(start)
	if i == nd.n || nd.start[i] > start {
		return nil, false
	}
	if nd.leaf {
		if nd.start[i] != start {
			return nil, false
		}
		c := new(node[T])
		*c = *nd
		c.removeSlot(i)
		c.size--
		return c, true
	}
	k, ok := erase(nd.kid[i], start)
	if !ok {
		return nil, false
	}
	c := new(node[T])
	*c = *nd
	c.size--
	switch {
	case k.n >= minEntries:
		c.setKid(i, k)
	case c.n == 1:
		// Only child: keep it as is (the root collapses later).
		if k.n == 0 {
			c.removeSlot(i)
		} else {
			c.setKid(i, k)
		}
	default:
		// Rebalance with a neighbour: merge when both fit in one node,
		// otherwise share their slots evenly.
		j := i + 1
		if j == c.n {
			j = i - 1
		}
		a, b := k, c.kid[j]
		lo := i
		if j < i {
			a, b, lo = b, k, j
		}
		if a.n+b.n <= maxEntries-1 {
			m := new(node[T])
			*m = *a
			m.appendFrom(b, 0, b.n)
			m.size = a.size + b.size
			c.removeSlot(lo + 1)
			if m.n == 0 {
				c.removeSlot(lo)
			} else {
				c.setKid(lo, m)
			}
		} else {
			total := a.n + b.n
			na := new(node[T])
			nb := &node[T]{leaf: a.leaf}
			*na = *a
			if na.n > total/2 {
				// Move a's tail to the front of b.
				nb.appendFrom(a, total/2, a.n)
				nb.appendFrom(b, 0, b.n)
				for x := total / 2; x < na.n; x++ {
					na.val[x], na.kid[x] = nil, nil
				}
				na.n = total / 2
			} else {
				na.appendFrom(b, 0, total/2-a.n)
				nb.appendFrom(b, total/2-a.n, b.n)
			}
			na.fixSize()
			nb.fixSize()
			c.setKid(lo, na)
			c.setKid(lo+1, nb)
		}
	}
	return c, true
}

// appendFrom appends slots [from,to) of src to the unpublished node nd.
func (nd *node[T]) appendFrom(src *node[T], from, to int) {
	n := nd.n
	copy(nd.start[n:], src.start[from:to])
	copy(nd.end[n:], src.end[from:to])
	copy(nd.val[n:], src.val[from:to])
	copy(nd.kid[n:], src.kid[from:to])
	nd.n += to - from
}
