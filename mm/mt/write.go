package mt

import "unsafe"

// Batch is a group of writes that readers see all at once, when Commit
// publishes it: a VMA split or merge changes several ranges, and the kernel
// makes such a change with one maple-tree store that readers under RCU see
// whole. Until Commit, the batch's nodes are private to it, so a batch changes
// the nodes it has already copied in place: many writes to nearby ranges (a
// dup_mmap storing every VMA in order) copy each node once, not once per
// write. The caller holds the tree's writer lock from Batch to Commit and
// makes no other write to the tree in between (Commit publishes the batch's
// version over whatever is there).
type Batch[T any] struct {
	t    *Tree[T]
	top  *node
	size int32
	gen  uint64
}

// Batch starts a group of writes to t.
func (t *Tree[T]) Batch() Batch[T] {
	t.gen++
	b := Batch[T]{t: t, top: t.root.Load(), gen: t.gen}
	if b.top != nil {
		b.size = b.top.size
	}
	return b
}

// Commit publishes the batch's writes in one atomic store.
func (b *Batch[T]) Commit() {
	if b.top != nil {
		if b.top.gen != b.gen {
			return // nothing written
		}
		b.top.size = b.size
	}
	b.t.root.Store(b.top)
}

// Store adds the range [start,end) with value v. The caller guarantees that
// start < end and that the range overlaps nothing stored (erase first), and
// holds the writer lock. Mirrors the effect of mas_store_gfp() on an empty
// range.
func (t *Tree[T]) Store(start, end uint64, v *T) {
	b := t.Batch()
	b.Store(start, end, v)
	b.Commit()
}

// Erase removes the range that starts at start, if there is one. The caller
// holds the writer lock. Mirrors the effect of mas_erase() / vma_iter_clear().
func (t *Tree[T]) Erase(start uint64) {
	b := t.Batch()
	b.Erase(start)
	b.Commit()
}

// Clear empties the tree in one atomic store (__mt_destroy at exit_mmap).
// The caller holds the writer lock; readers keep the tree they loaded.
func (t *Tree[T]) Clear() { t.root.Store(nil) }

// Store is Tree.Store within the batch.
func (b *Batch[T]) Store(start, end uint64, v *T) {
	if start >= end {
		panic("mt: Store of an empty range")
	}
	if b.top == nil {
		l := b.newNode(0)
		asLeaf(l).start[0], l.end[0], l.ptr[0], l.n = start, end, unsafe.Pointer(v), 1
		b.top, b.size = l, 1
		return
	}
	nl, nr := b.insert(b.top, start, end, unsafe.Pointer(v))
	if nr != nil {
		up := b.newNode(b.top.height + 1)
		up.n = 2
		up.setKid(0, nl)
		up.setKid(1, nr)
		nl = up
	}
	b.top = nl
	b.size++
}

// Erase is Tree.Erase within the batch.
func (b *Batch[T]) Erase(start uint64) {
	if b.top == nil {
		return
	}
	c, ok := b.erase(b.top, start)
	if !ok {
		return
	}
	for c.height > 0 && c.n == 1 {
		c = c.kid(0) // the batch's own: the erase went through it
	}
	if c.n == 0 {
		c = nil
	}
	b.top = c
	b.size--
}

// own returns nd itself if this batch made it, else a copy the batch owns.
func (b *Batch[T]) own(nd *node) *node {
	if nd.gen == b.gen {
		return nd
	}
	var c *node
	if nd.height == 0 {
		l := new(leaf)
		*l = *asLeaf(nd)
		c = &l.node
	} else {
		c = new(node)
		*c = *nd
	}
	c.gen = b.gen
	return c
}

// newNode returns an empty node of height h owned by the batch.
func (b *Batch[T]) newNode(h int16) *node {
	var nd *node
	if h == 0 {
		nd = &new(leaf).node
	} else {
		nd = new(node)
	}
	nd.height, nd.gen = h, b.gen
	return nd
}

func (nd *node) setKid(i int, k *node) {
	nd.ptr[i] = unsafe.Pointer(k)
	nd.end[i] = k.end[k.n-1]
}

// insert returns nd, owned by the batch, with the range added; if it
// overflowed it is split and the upper half is returned in r. A node that
// overflows by an append at its end (ranges stored in increasing order, as
// dup_mmap and bottom-up mmap placement do) stays full and the new slot
// starts the right node, so such trees are full instead of half full (the
// maple tree's "rebalance to the left" for appends has the same aim).
func (b *Batch[T]) insert(nd *node, start, end uint64, v unsafe.Pointer) (l, r *node) {
	i := nd.findSlot(start)
	if nd.height == 0 && i < int(nd.n) && asLeaf(nd).start[i] < end {
		panic("mt: Store of a range that overlaps a stored one")
	}
	c := b.own(nd)
	if c.height == 0 {
		c.insertSlot(i)
		asLeaf(c).start[i], c.end[i], c.ptr[i] = start, end, v
	} else {
		if i == int(c.n) {
			i--
		}
		kl, kr := b.insert(c.kid(i), start, end, v)
		c.setKid(i, kl)
		if kr != nil {
			i++
			c.insertSlot(i)
			c.setKid(i, kr)
		}
	}
	if c.n <= maxEntries {
		return c, nil
	}
	cut := int(c.n) / 2
	if i == int(c.n)-1 {
		cut = maxEntries // an append: the new slot alone goes right
	}
	r = b.newNode(c.height)
	r.appendFrom(c, cut, int(c.n))
	c.truncate(cut)
	return c, r
}

// erase returns nd, owned by the batch, without the range starting at start;
// ok is false, and nothing was copied, if there is no such range. The result
// may be underfull; the caller rebalances it.
func (b *Batch[T]) erase(nd *node, start uint64) (*node, bool) {
	i := nd.findSlot(start)
	if i == int(nd.n) {
		return nil, false
	}
	if nd.height == 0 {
		if asLeaf(nd).start[i] != start {
			return nil, false
		}
		c := b.own(nd)
		c.removeSlot(i)
		return c, true
	}
	k, ok := b.erase(nd.kid(i), start)
	if !ok {
		return nil, false
	}
	c := b.own(nd)
	switch {
	case k.n >= minEntries:
		c.setKid(i, k)
	case c.n == 1:
		// An only child (of the top, or of a node an append split left
		// with one): keep it, or drop it when empty; the parent
		// rebalances an emptied node away and Erase collapses the top.
		if k.n == 0 {
			c.removeSlot(i)
		} else {
			c.setKid(i, k)
		}
	default:
		// Rebalance with a neighbour: merge the two when they fit in
		// one node, otherwise share their slots evenly.
		lo := i
		if i == int(c.n)-1 {
			lo = i - 1
		}
		c.ptr[i] = unsafe.Pointer(k)
		x, y := c.kid(lo), c.kid(lo+1)
		if x.n+y.n <= maxEntries {
			m := b.own(x)
			m.appendFrom(y, 0, int(y.n))
			c.setKid(lo, m)
			c.removeSlot(lo + 1)
		} else {
			half := int(x.n+y.n) / 2
			na, nb := b.newNode(x.height), b.newNode(x.height)
			na.appendFrom(x, 0, min(int(x.n), half))
			na.appendFrom(y, 0, half-int(na.n))
			if int(x.n) > half {
				nb.appendFrom(x, half, int(x.n))
				nb.appendFrom(y, 0, int(y.n))
			} else {
				nb.appendFrom(y, half-int(x.n), int(y.n))
			}
			c.setKid(lo, na)
			c.setKid(lo+1, nb)
		}
	}
	return c, true
}

// insertSlot opens slot i of the batch's node nd.
func (nd *node) insertSlot(i int) {
	n := int(nd.n)
	copy(nd.end[i+1:n+1], nd.end[i:n])
	copy(nd.ptr[i+1:n+1], nd.ptr[i:n])
	if nd.height == 0 {
		l := asLeaf(nd)
		copy(l.start[i+1:n+1], l.start[i:n])
	}
	nd.n++
}

// removeSlot closes slot i of the batch's node nd.
func (nd *node) removeSlot(i int) {
	n := int(nd.n)
	copy(nd.end[i:n-1], nd.end[i+1:n])
	copy(nd.ptr[i:n-1], nd.ptr[i+1:n])
	if nd.height == 0 {
		l := asLeaf(nd)
		copy(l.start[i:n-1], l.start[i+1:n])
	}
	nd.ptr[n-1] = nil
	nd.n--
}

// appendFrom appends slots [from,to) of src to the batch's node nd of the
// same height.
func (nd *node) appendFrom(src *node, from, to int) {
	n := int(nd.n)
	copy(nd.end[n:], src.end[from:to])
	copy(nd.ptr[n:], src.ptr[from:to])
	if nd.height == 0 {
		copy(asLeaf(nd).start[n:], asLeaf(src).start[from:to])
	}
	nd.n += int16(to - from)
}

// truncate drops the slots from n on of the batch's node nd.
func (nd *node) truncate(n int) {
	clear(nd.ptr[n:nd.n])
	nd.n = int16(n)
}
