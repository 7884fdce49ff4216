// Package mt is the model's maple tree: an ordered map of non-overlapping
// half-open address ranges [start,end) to values, readable without any lock.
//
// It plays the role of lib/maple_tree.c in an mm_struct created with
// MT_FLAGS_USE_RCU | MT_FLAGS_LOCK_EXTERN: writers (Store, Erase, Batch) are
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
// A Batch groups writes that readers must see at once (the kernel changes
// several ranges with one maple-tree store when it splits or merges VMAs);
// nodes a batch has already copied are its own until Commit, so it changes
// them in place, and a batch of ordered stores (dup_mmap) copies each node
// once.
//
// Because nodes are immutable, Clone is O(1): the two trees share every node
// (the kernel's __mt_dup copies them all), and later writes on either tree
// copy only the paths they change.
//
// Layout: like the maple tree's maple_range_64 nodes, a node holds up to 14
// ranges or children (15 slots, one spare). Internal nodes keep only the end (pivot) of each child's last range;
// leaves keep start, end and value. A slot is an unsafe.Pointer to a child
// node or to a value, so the two node kinds share one header and the garbage
// collector scans one pointer array per node.
package mt

import (
	"iter"
	"sync/atomic"
	"unsafe"
)

// Range is a half-open address range [Start, End).
type Range struct{ Start, End uint64 }

// slots is the length of a node's arrays. A published node holds at most
// maxEntries; the spare slot lets insert open a slot before splitting.
const (
	slots      = 15
	maxEntries = slots - 1
	minEntries = maxEntries / 4 // an erase leaves a non-top node at least this full
)

// node is the header shared by internal nodes and leaves. In an internal node
// end[i] is the end of the last range below child ptr[i] (*node); in a leaf
// it is the end of range i, whose value is ptr[i] (*T).
type node struct {
	n      int16
	height int16  // 0 for a leaf
	size   int32  // ranges in the tree; kept only in the top node
	gen    uint64 // the write batch that made the node (see Batch)
	end    [slots]uint64
	ptr    [slots]unsafe.Pointer
}

// leaf is a node of ranges. node must stay its first field: a *leaf and its
// *node are the same address, and the tree converts between them by height.
type leaf struct {
	node
	start [slots]uint64
}

func asLeaf(nd *node) *leaf { return (*leaf)(unsafe.Pointer(nd)) }

func (nd *node) kid(i int) *node { return (*node)(nd.ptr[i]) }

// Tree is an RCU-readable range tree. The zero value is an empty tree.
//
// Writes (Store, Erase, Clear, Batch) must be serialised by the caller (the
// mmap write lock in the model); all read methods may run concurrently with
// them and with each other.
type Tree[T any] struct {
	root atomic.Pointer[node] // the published top node; nil when empty
	// gen is the generation of the tree's last write batch (Batch),
	// written under the writer lock. Every node the tree can reach was
	// made by a batch of an earlier generation: its own, or, before a
	// Clone, those of the tree it was cloned from, whose gen the clone
	// starts from. So a batch's nodes are its own, and no counter is
	// shared by trees that never met (two runs in one process).
	gen uint64
}

// Snapshot is an immutable view of a tree at one instant: what an RCU reader
// holds between rcu_read_lock and rcu_read_unlock. Its zero value is empty.
type Snapshot[T any] struct {
	top *node
}

// Snapshot returns the current tree as an immutable view.
func (t *Tree[T]) Snapshot() Snapshot[T] { return Snapshot[T]{t.root.Load()} }

// Clone returns a new tree holding the same ranges, sharing every node with t.
// It costs O(1); later writes to either tree copy only the paths they change.
// The caller must hold the writer lock of t (as dup_mmap holds the old mm's
// mmap write lock).
func (t *Tree[T]) Clone() *Tree[T] {
	c := &Tree[T]{gen: t.gen}
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
// Ends are sorted, so that is the number of ends <= addr; counting them all
// compiles without branches and beats a binary search's mispredictions on
// 14 slots.
func (nd *node) findSlot(addr uint64) int {
	i := 0
	for _, e := range nd.end[:nd.n] {
		if e <= addr {
			i++
		}
	}
	return i
}

// leafFind descends to the leaf holding the first range with end > addr and
// returns it with the slot, or nil.
func (s Snapshot[T]) leafFind(addr uint64) (*leaf, int) {
	nd := s.top
	if nd == nil {
		return nil, 0
	}
	for {
		i := nd.findSlot(addr)
		if i == int(nd.n) {
			return nil, 0
		}
		if nd.height == 0 {
			return asLeaf(nd), i
		}
		nd = nd.kid(i)
	}
}

// Load returns the value of the range containing addr, or nil.
func (s Snapshot[T]) Load(addr uint64) *T {
	l, i := s.leafFind(addr)
	if l == nil || l.start[i] > addr {
		return nil
	}
	return (*T)(l.ptr[i])
}

// Find returns the first range with end > addr, or v == nil.
func (s Snapshot[T]) Find(addr uint64) (start, end uint64, v *T) {
	l, i := s.leafFind(addr)
	if l == nil {
		return 0, 0, nil
	}
	return l.start[i], l.end[i], (*T)(l.ptr[i])
}

// Prev returns the last range with start < addr, or v == nil.
func (s Snapshot[T]) Prev(addr uint64) (start, end uint64, v *T) {
	if s.top == nil || addr == 0 {
		return 0, 0, nil
	}
	l, i := prev(s.top, addr)
	if l == nil {
		return 0, 0, nil
	}
	return l.start[i], l.end[i], (*T)(l.ptr[i])
}

// prev finds the last range with start < addr (addr > 0) below nd.
// The children before the first one whose end reaches addr hold only ranges
// starting below addr, the children after it only ranges starting at or
// above addr; so the answer is in that child or is the last range of the one
// before it.
func prev(nd *node, addr uint64) (*leaf, int) {
	j := nd.findSlot(addr - 1)
	if nd.height == 0 {
		l := asLeaf(nd)
		if j == int(nd.n) || l.start[j] >= addr {
			j--
		}
		if j < 0 {
			return nil, 0
		}
		return l, j
	}
	if j < int(nd.n) {
		if l, i := prev(nd.kid(j), addr); l != nil {
			return l, i
		}
	}
	if j == 0 {
		return nil, 0
	}
	for nd = nd.kid(j - 1); nd.height > 0; {
		nd = nd.kid(int(nd.n) - 1)
	}
	return asLeaf(nd), int(nd.n) - 1
}

// Len returns the number of ranges in the snapshot.
func (s Snapshot[T]) Len() int {
	if s.top == nil {
		return 0
	}
	return int(s.top.size)
}

// All yields every range in address order.
func (s Snapshot[T]) All() iter.Seq2[Range, *T] { return s.From(0) }

// From yields the ranges with end > addr in address order.
func (s Snapshot[T]) From(addr uint64) iter.Seq2[Range, *T] {
	return func(yield func(Range, *T) bool) {
		if s.top != nil {
			walkFrom(s.top, addr, yield)
		}
	}
}

func walkFrom[T any](nd *node, addr uint64, yield func(Range, *T) bool) bool {
	i, n := nd.findSlot(addr), int(nd.n)
	if nd.height == 0 {
		l := asLeaf(nd)
		for ; i < n; i++ {
			if !yield(Range{l.start[i], l.end[i]}, (*T)(l.ptr[i])) {
				return false
			}
		}
		return true
	}
	if i < n {
		if !walkFrom(nd.kid(i), addr, yield) {
			return false
		}
		i++
	}
	for ; i < n; i++ {
		if !walkFrom(nd.kid(i), 0, yield) {
			return false
		}
	}
	return true
}
