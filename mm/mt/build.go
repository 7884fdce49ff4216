package mt

import "unsafe"

// Builder builds a tree from ranges appended in increasing order, bottom up,
// with full nodes: the bulk store dup_mmap makes into the child's tree while
// no reader can see it (mas_expected_entries and bulk stores in v6.1–v6.7,
// __mt_dup plus vma_iter_bulk_store since). It allocates about one node per
// 14 ranges instead of a path of nodes per range. The zero value is ready.
type Builder[T any] struct {
	open []*node // open[h]: the unpublished node being filled at height h
	size int
	last uint64 // end of the last range appended
}

// Append adds [start,end) with value v after every range appended so far.
func (b *Builder[T]) Append(start, end uint64, v *T) {
	if start >= end || (b.size > 0 && start < b.last) {
		panic("mt: Builder.Append out of order or empty")
	}
	if len(b.open) == 0 {
		b.open = append(b.open, newNode(0))
	}
	nd := b.open[0]
	if nd.n == maxEntries {
		b.push(1, nd)
		nd = newNode(0)
		b.open[0] = nd
	}
	i := nd.n
	asLeaf(nd).start[i], nd.end[i], nd.ptr[i] = start, end, unsafe.Pointer(v)
	nd.n++
	b.size++
	b.last = end
}

// push appends the finished node k as the last child at height h.
func (b *Builder[T]) push(h int32, k *node) {
	if len(b.open) <= int(h) {
		b.open = append(b.open, newNode(h))
	}
	nd := b.open[h]
	if nd.n == maxEntries {
		b.push(h+1, nd)
		nd = newNode(h)
		b.open[h] = nd
	}
	nd.setKid(int(nd.n), k)
	nd.n++
}

// Publish replaces the contents of t with the ranges appended, in one atomic
// store, and resets b. The caller holds t's writer lock.
func (b *Builder[T]) Publish(t *Tree[T]) {
	if b.size == 0 {
		t.root.Store(nil)
		return
	}
	for h := 0; h < len(b.open)-1; h++ {
		b.push(int32(h+1), b.open[h])
	}
	top := b.open[len(b.open)-1]
	top.size = b.size
	*b = Builder[T]{}
	t.root.Store(top)
}

// Clear empties the tree in one atomic store (__mt_destroy at exit_mmap).
// The caller holds the writer lock; readers keep the tree they loaded.
func (t *Tree[T]) Clear() { t.root.Store(nil) }
