package mt

import (
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// ref is the obviously correct model the tree is checked against: a sorted
// slice of ranges.
type ref struct {
	r []Range
	v []*int
}

func (m *ref) store(s, e uint64, v *int) {
	i, _ := slices.BinarySearchFunc(m.r, s, func(r Range, s uint64) int {
		if r.Start < s {
			return -1
		}
		if r.Start > s {
			return 1
		}
		return 0
	})
	m.r = slices.Insert(m.r, i, Range{s, e})
	m.v = slices.Insert(m.v, i, v)
}

func (m *ref) erase(s uint64) {
	for i, r := range m.r {
		if r.Start == s {
			m.r = slices.Delete(m.r, i, i+1)
			m.v = slices.Delete(m.v, i, i+1)
			return
		}
	}
}

func (m *ref) overlaps(s, e uint64) bool {
	for _, r := range m.r {
		if r.Start < e && s < r.End {
			return true
		}
	}
	return false
}

func (m *ref) find(a uint64) (Range, *int) {
	for i, r := range m.r {
		if r.End > a {
			return r, m.v[i]
		}
	}
	return Range{}, nil
}

func (m *ref) prev(a uint64) (Range, *int) {
	for i := len(m.r) - 1; i >= 0; i-- {
		if m.r[i].Start < a {
			return m.r[i], m.v[i]
		}
	}
	return Range{}, nil
}

func checkAgainst(t *testing.T, tr *Tree[int], m *ref, rng *rand.Rand, space uint64) {
	t.Helper()
	if tr.Len() != len(m.r) {
		t.Fatalf("Len = %d, want %d", tr.Len(), len(m.r))
	}
	i := 0
	for r, v := range tr.All() {
		if i >= len(m.r) || r != m.r[i] || v != m.v[i] {
			t.Fatalf("All()[%d] = %v %p, want %v", i, r, v, m.r[min(i, len(m.r)-1)])
		}
		i++
	}
	if i != len(m.r) {
		t.Fatalf("All yielded %d ranges, want %d", i, len(m.r))
	}
	for k := 0; k < 50; k++ {
		a := rng.Uint64N(space + 10)
		r, v := m.find(a)
		s, e, got := tr.Find(a)
		if got != v || (v != nil && (s != r.Start || e != r.End)) {
			t.Fatalf("Find(%d) = [%d,%d) %p, want %v %p", a, s, e, got, r, v)
		}
		var want *int
		if v != nil && r.Start <= a {
			want = v
		}
		if got := tr.Load(a); got != want {
			t.Fatalf("Load(%d) = %p, want %p", a, got, want)
		}
		r, v = m.prev(a)
		s, e, got = tr.Prev(a)
		if got != v || (v != nil && (s != r.Start || e != r.End)) {
			t.Fatalf("Prev(%d) = [%d,%d) %p, want %v %p", a, s, e, got, r, v)
		}
		// From(a) is the tail of the reference starting at Find(a).
		j := slices.IndexFunc(m.r, func(r Range) bool { return r.End > a })
		if j < 0 {
			j = len(m.r)
		}
		for r := range tr.From(a) {
			if j >= len(m.r) || r != m.r[j] {
				t.Fatalf("From(%d) yielded %v, want index %d of %d", a, r, j, len(m.r))
			}
			j++
		}
		if j != len(m.r) {
			t.Fatalf("From(%d) stopped early at %d of %d", a, j, len(m.r))
		}
	}
}

// TestRandomAgainstReference drives random stores and erases (enough to grow
// the tree several levels deep and shrink it back to empty) and compares every
// read method with the reference after each step.
func TestRandomAgainstReference(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	const space = 20000
	var tr Tree[int]
	m := &ref{}
	steps := 6000
	for step := 0; step < steps; {
		// A batch of 1 to 8 writes, invisible until it commits.
		before := tr.Snapshot()
		n0 := len(m.r)
		b := tr.Batch()
		for k := rng.IntN(8); k >= 0 && step < steps; k, step = k-1, step+1 {
			growing := step < steps*2/3
			if (growing && rng.IntN(4) != 0) || (!growing && rng.IntN(4) == 0) || len(m.r) == 0 {
				s := rng.Uint64N(space)
				e := s + 1 + rng.Uint64N(5)
				if m.overlaps(s, e) {
					continue
				}
				v := new(int)
				*v = step
				b.Store(s, e, v)
				m.store(s, e, v)
			} else {
				r := m.r[rng.IntN(len(m.r))]
				b.Erase(r.Start)
				m.erase(r.Start)
				b.Erase(r.Start) // erasing what is not there is a no-op
			}
		}
		if tr.Len() != n0 || tr.Snapshot() != before {
			t.Fatal("a batch is visible before Commit")
		}
		b.Commit()
		if step%7 == 0 || step > steps-100 {
			checkAgainst(t, &tr, m, rng, space)
			if top := tr.root.Load(); top != nil {
				checkNode(t, top, top.height)
			}
		}
	}
	for len(m.r) > 0 {
		r := m.r[rng.IntN(len(m.r))]
		tr.Erase(r.Start)
		m.erase(r.Start)
	}
	checkAgainst(t, &tr, m, rng, space)
	if tr.root.Load() != nil {
		t.Fatal("empty tree keeps nodes")
	}
}

// TestShape builds 30,000 ranges in increasing order, checks the node
// invariants and the depth, then erases every third range and checks again.
// Appends split full nodes 14+1, so 30,000 ranges fill 2,143 leaves under
// 154, 11 and 1 internal nodes: 4 levels. A tree of nodes split half and half
// (7 per leaf) would need 5.
func TestShape(t *testing.T) {
	t.Parallel()
	var tr Tree[int]
	for i := uint64(0); i < 30000; i++ {
		tr.Store(i*2, i*2+1, new(int))
	}
	shape := func(want int) int {
		top := tr.root.Load()
		if size := checkNode(t, top, top.height); size != want || tr.Len() != want {
			t.Fatalf("size %d Len %d, want %d", size, tr.Len(), want)
		}
		return int(top.height) + 1
	}
	if d := shape(30000); d != 4 {
		t.Fatalf("depth %d, want 4", d)
	}
	for i := uint64(0); i < 30000; i += 3 {
		tr.Erase(i * 2)
	}
	shape(20000)
}

// checkNode checks the invariants of the subtree at nd, of height h, and
// returns the number of ranges in it.
func checkNode(t *testing.T, nd *node, h int16) int {
	t.Helper()
	if nd.height != h {
		t.Fatalf("height %d, want %d", nd.height, h)
	}
	if nd.n > maxEntries || nd.n < 1 {
		t.Fatalf("node with %d slots", nd.n)
	}
	if h == 0 {
		l := asLeaf(nd)
		for i := 0; i < int(nd.n); i++ {
			if l.start[i] >= l.end[i] || (i > 0 && l.start[i] < l.end[i-1]) {
				t.Fatalf("leaf out of order")
			}
		}
		return int(nd.n)
	}
	size := 0
	for i := 0; i < int(nd.n); i++ {
		k := nd.kid(i)
		if nd.end[i] != k.end[k.n-1] || (i > 0 && nd.end[i] <= nd.end[i-1]) {
			t.Fatalf("bad pivot")
		}
		size += checkNode(t, k, h-1)
	}
	return size
}

// spacedTree returns the tree the clone tests start from: 1000 ranges
// [i*10, i*10+5], each with an entry of its own.
func spacedTree() *Tree[int] {
	var a Tree[int]
	for i := uint64(0); i < 1000; i++ {
		a.Store(i*10, i*10+5, new(int))
	}
	return &a
}

// TestCloneIsIndependent: writes to a clone or to the original after Clone are
// invisible to the other one, and a snapshot never changes.
func TestCloneIsIndependent(t *testing.T) {
	t.Parallel()
	a := spacedTree()
	snap := a.Snapshot()
	b := a.Clone()
	b.Erase(500)
	nv := new(int)
	b.Store(500, 503, nv)
	a.Erase(0)
	if a.Load(500) == nv || b.Load(500) != nv {
		t.Fatal("clone write leaked into the original")
	}
	if a.Load(0) != nil || b.Load(0) == nil {
		t.Fatal("original write leaked into the clone")
	}
	if snap.Len() != 1000 || snap.Load(0) == nil || snap.Load(500) == nv {
		t.Fatal("snapshot changed")
	}
	if a.Len() != 999 || b.Len() != 1000 {
		t.Fatalf("Len a=%d b=%d", a.Len(), b.Len())
	}
}

// TestCloneGenerations: every node a tree can reach was made by a batch of
// an earlier generation than its next one, also in a clone (which starts
// from its original's generation), so no batch writes in place into a node
// it did not make.
func TestCloneGenerations(t *testing.T) {
	t.Parallel()
	a := spacedTree()
	b := a.Clone()
	b.Erase(500)
	a.Erase(0)
	for name, tr := range map[string]*Tree[int]{"original": a, "clone": b} {
		if g := maxGen(tr.root.Load()); g > tr.gen {
			t.Errorf("%s: a reachable node of generation %d, after the tree's %d", name, g, tr.gen)
		}
	}
}

// maxGen returns the highest generation of the nodes under nd.
func maxGen(nd *node) uint64 {
	g := nd.gen
	for i := 0; nd.height > 0 && i < int(nd.n); i++ {
		g = max(g, maxGen(nd.kid(i)))
	}
	return g
}

func TestStoreOverlapPanics(t *testing.T) {
	t.Parallel()
	var tr Tree[int]
	tr.Store(10, 20, new(int))
	defer func() {
		if recover() == nil {
			t.Fatal("overlapping Store did not panic")
		}
	}()
	tr.Store(15, 25, new(int))
}

// TestConcurrentReaders: one writer slides a window of W consecutive ranges
// (store the next, erase the oldest) while readers without any lock check that
// every snapshot they take is one the writer published: W or W+1 consecutive
// ranges whose values match their starts, and Find and Prev agree with it.
// In the second half the writer makes each slide one Batch, and readers that
// saw the switch must never see W+1. Run with -race.
func TestConcurrentReaders(t *testing.T) {
	t.Parallel()
	const W, steps, P = 40, 3000, 4096
	type val struct{ k uint64 }
	var tr Tree[val]
	for k := uint64(0); k < W; k++ {
		tr.Store(k*P, k*P+P, &val{k})
	}
	var done, batched atomic.Bool
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for !done.Load() {
				wantW := batched.Load()
				s := tr.Snapshot()
				var first, n uint64
				for rg, v := range s.All() {
					if v.k*P != rg.Start || rg.End != rg.Start+P {
						t.Error("value does not match its range")
						return
					}
					if n == 0 {
						first = v.k
					} else if v.k != first+n {
						t.Error("snapshot is not a run of consecutive ranges")
						return
					}
					n++
				}
				if n != W && (n != W+1 || wantW) || int(n) != s.Len() {
					t.Error("snapshot has the wrong number of ranges")
					return
				}
				last := first + n - 1
				if _, _, v := s.Find(0); v == nil || v.k != first {
					t.Error("snapshot Find disagrees with its All")
					return
				}
				if _, _, v := s.Prev(^uint64(0)); v == nil || v.k != last {
					t.Error("snapshot Prev disagrees with its All")
					return
				}
				// The newest range is either there (entirely) or not.
				if v := tr.Load(last*P + P/2); v != nil && v.k != last {
					t.Error("Load returned a foreign value")
					return
				}
			}
		})
	}
	for k := uint64(W); k < W+steps; k++ {
		if k < W+steps/2 {
			tr.Store(k*P, k*P+P, &val{k})
			tr.Erase((k - W) * P)
			continue
		}
		batched.Store(true)
		b := tr.Batch()
		b.Store(k*P, k*P+P, &val{k})
		b.Erase((k - W) * P)
		b.Commit()
	}
	done.Store(true)
	wg.Wait()
}

// build returns a tree of n ranges 64 KiB apart. The values live in one
// slice, so the benchmarks' garbage collection cost is the tree's own.
func build(n int) *Tree[int] {
	tr := new(Tree[int])
	vals := make([]int, n)
	for i := range vals {
		vals[i] = i
		tr.Store(uint64(i)<<16, uint64(i)<<16+0x8000, &vals[i])
	}
	return tr
}

func TestLoadDoesNotAllocate(t *testing.T) {
	tr := build(30000)
	a := uint64(12345)<<16 + 7
	if n := testing.AllocsPerRun(100, func() {
		if tr.Load(a) == nil {
			t.Fatal("miss")
		}
	}); n != 0 {
		t.Fatalf("Load allocates %v times", n)
	}
}

func BenchmarkLoadHit30000(b *testing.B) {
	tr := build(30000)
	rng := rand.New(rand.NewPCG(3, 4))
	addrs := make([]uint64, 4096)
	for i := range addrs {
		addrs[i] = uint64(rng.IntN(30000))<<16 + 100
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if tr.Load(addrs[i&4095]) == nil {
			b.Fatal("miss")
		}
	}
}

// benchStoreErase30000 runs storeErase b.N times on a tree of 30,000 ranges
// 64 KiB apart, each time with s the start of a random free 4 KiB gap, and
// reports the CPU time per op next to the wall time.
func benchStoreErase30000(b *testing.B, storeErase func(tr *Tree[int], s uint64, v *int)) {
	tr := build(30000)
	rng := rand.New(rand.NewPCG(5, 6))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	v := new(int)
	for i := 0; i < b.N; i++ {
		storeErase(tr, uint64(rng.IntN(30000))<<16+0x9000, v)
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

func BenchmarkStoreErase30000(b *testing.B) {
	benchStoreErase30000(b, func(tr *Tree[int], s uint64, v *int) {
		tr.Store(s, s+0x1000, v)
		tr.Erase(s)
	})
}

// BenchmarkStoreEraseBatch30000 is the same pair in one Batch, as a VMA
// split or merge would make it: the path is copied once.
func BenchmarkStoreEraseBatch30000(b *testing.B) {
	benchStoreErase30000(b, func(tr *Tree[int], s uint64, v *int) {
		bt := tr.Batch()
		bt.Store(s, s+0x1000, v)
		bt.Erase(s)
		bt.Commit()
	})
}

func BenchmarkIterate30000(b *testing.B) {
	tr := build(30000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := 0
		for range tr.All() {
			n++
		}
		if n != 30000 {
			b.Fatal(n)
		}
	}
}

// TestBatchAppend: ranges appended in one batch (as dup_mmap stores every
// VMA) give the same tree contents as separate Stores, for sizes around every
// node boundary (14, 15, 196, 197, 14^3 and 14^3+1), in full nodes; the tree
// then takes random Stores and Erases.
func TestBatchAppend(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 2, 14, 15, 16, 195, 196, 197, 2744, 2745, 5000} {
		var tr Tree[int]
		tr.Store(1<<40, 1<<40+1, new(int))
		vals := make([]int, n)
		b := tr.Batch()
		b.Erase(1 << 40)
		for i := range vals {
			b.Store(uint64(i)*10, uint64(i)*10+5, &vals[i])
		}
		b.Commit()
		m := &ref{}
		for i := range vals {
			m.store(uint64(i)*10, uint64(i)*10+5, &vals[i])
		}
		rng := rand.New(rand.NewPCG(uint64(n), 7))
		checkAgainst(t, &tr, m, rng, uint64(n)*10)
		if top := tr.root.Load(); top != nil {
			checkNode(t, top, top.height)
			// Full leaves: n ranges in ceil(n/14) leaves, so a tree of
			// 2,744 = 14^3 ranges is 3 levels deep, of 2,745 four.
			want := int16(0)
			for c := 14; c < n; c *= 14 {
				want++
			}
			if top.height != want {
				t.Fatalf("%d ranges: height %d, want %d", n, top.height, want)
			}
		}
		for k := 0; k < n/3; k++ {
			r := m.r[rng.IntN(len(m.r))]
			tr.Erase(r.Start)
			m.erase(r.Start)
			s := r.Start + 6
			if !m.overlaps(s, s+2) {
				v := new(int)
				tr.Store(s, s+2, v)
				m.store(s, s+2, v)
			}
		}
		checkAgainst(t, &tr, m, rng, uint64(n)*10)
	}
	var tr Tree[int]
	tr.Store(1, 2, new(int))
	tr.Clear()
	if tr.Len() != 0 || tr.Load(1) != nil {
		t.Fatal("Clear left ranges")
	}
}

// BenchmarkBatch1000 stores 1,000 ranges in order in one batch (dup_mmap of
// 1,000 VMAs).
func BenchmarkBatch1000(b *testing.B) {
	vals := make([]int, 1000)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var tr Tree[int]
		bt := tr.Batch()
		for k := range vals {
			bt.Store(uint64(k)<<16, uint64(k)<<16+0x8000, &vals[k])
		}
		bt.Commit()
	}
}

// BenchmarkStore1000 is BenchmarkBatch1000 done with Store, for comparison.
func BenchmarkStore1000(b *testing.B) {
	vals := make([]int, 1000)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var tr Tree[int]
		for k := range vals {
			tr.Store(uint64(k)<<16, uint64(k)<<16+0x8000, &vals[k])
		}
	}
}
