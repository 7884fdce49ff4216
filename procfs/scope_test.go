package procfs

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"mmlab/errno"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/sched"
	"mmlab/uapi"
)

// firstLine and lastLine parse the first and the last line of a chunk.
func firstLine(t *testing.T, c []byte) uapi.VMA {
	t.Helper()
	var v uapi.VMA
	if err := uapi.ParseLine(c[:bytes.IndexByte(c, '\n')], &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func lastLine(t *testing.T, c []byte) uapi.VMA {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(c), "\n"), "\n")
	var v uapi.VMA
	if err := uapi.ParseLine([]byte(lines[len(lines)-1]), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// A line that would fill the 4096-byte buffer exactly overflows it
// (seq_has_overflowed: count == size) and opens the next chunk.
func TestChunkOfExactlyAPageOverflows(t *testing.T) {
	t.Parallel()
	const n = 93
	m := piecesMM(t, n)
	in := mm.NewInode(new(mm.Namespace), "x", 4096, nil)
	fileAt := uint64(walkArena + n*3*4096)
	if _, err := m.Mmap(nil, fileAt, 4096, mm.PROT_READ, mm.MAP_PRIVATE|mm.MAP_FIXED, mm.Open(in), 0); err != nil {
		t.Fatal(err)
	}
	pieces(t, m, fileAt+4096, 10)
	vs := m.VMAs()
	var before []byte
	for _, v := range vs[:n] {
		before = ShowMapVMA(before, v)
	}
	// Name the file so that its line ends the page exactly.
	short := len(ShowMapVMA(nil, vs[n]))
	in.Name = "/" + strings.Repeat("f", ChunkSize-len(before)-short)
	if got := len(ShowMapVMA(before, vs[n])); got != ChunkSize {
		t.Fatalf("setup: %d bytes, want %d", got, ChunkSize)
	}
	for _, v := range variants {
		f := mustOpenMaps(m, Options{Variant: v})
		c, err := f.Read()
		if err != nil {
			t.Fatal(err)
		}
		if len(c) != len(before) {
			t.Errorf("%s: first chunk %d bytes, want %d: a line filling the page is overflow", v, len(c), len(before))
		}
		if c, _ = f.Read(); !bytes.HasPrefix(c, ShowMapVMA(nil, vs[n])) {
			t.Errorf("%s: the second chunk does not start with the file's line", v)
		}
	}
}

// Where a chunk resumes, per version: v6.16 (Before) at the first VMA not
// yet shown, so that a VMA mapped meanwhile in the gap before it is not
// shown; v6.17+ (After) at the end of the last VMA shown, so that it is.
func TestResumePositionPerVersion(t *testing.T) {
	t.Parallel()
	for _, v := range variants {
		m := mm.New(new(mm.Namespace), machine.MustNamed("x86-64").Features)
		// Pieces of 3 pages with a free page after each.
		for i := range 200 {
			prot := mm.PROT_READ | mm.PROT_WRITE
			if i%2 == 1 {
				prot = mm.PROT_READ
			}
			if _, err := m.Mmap(nil, walkArena+uint64(i)*4*4096, 3*4096, prot, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED, nil, 0); err != nil {
				t.Fatal(err)
			}
		}
		f := mustOpenMaps(m, Options{Variant: v})
		c, err := f.Read()
		if err != nil {
			t.Fatal(err)
		}
		last := lastLine(t, c)
		// An executable page in the gap after the last VMA shown merges
		// with neither neighbour.
		if _, err := m.Mmap(nil, last.End, 4096, mm.PROT_READ|mm.PROT_EXEC, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED, nil, 0); err != nil {
			t.Fatal(err)
		}
		if c, err = f.Read(); err != nil {
			t.Fatal(err)
		}
		first := firstLine(t, c)
		want := last.End + 4096 // v6.16: the next piece
		if v == After {
			want = last.End // v6.17+: the new page
		}
		if first.Start != want {
			t.Errorf("%s: the second chunk starts at %#x, want %#x", v, first.Start, want)
		}
	}
}

// With PreemptNone a read is preempted only on its way back to user space;
// with PreemptFull also inside, once per line at least.
func TestPreemptionPoints(t *testing.T) {
	t.Parallel()
	m := piecesMM(t, 50)
	for _, v := range variants {
		for _, p := range []Preemption{PreemptNone, PreemptFull} {
			n := 0
			f := mustOpenMaps(m, Options{Variant: v, Preempt: p, Point: func() { n++ }})
			if _, err := f.Read(); err != nil {
				t.Fatal(err)
			}
			if p == PreemptNone && n != 1 || p == PreemptFull && n < 51 {
				t.Errorf("%s, preempt %s: %d preemption points in a read of 50 lines", v, p, n)
			}
		}
	}
}

// The After walk (v6.17+) keeps the current VMA read-locked while its line
// is formatted, so a reader preempted there holds that VMA's lock (and only
// that one).
func TestPreemptedAfterWalkHoldsTheVMALock(t *testing.T) {
	t.Parallel()
	m := piecesMM(t, 5)
	vs := m.VMAs()
	n := 0
	var locked [][]int // per point, the indices of the read-locked VMAs
	f := mustOpenMaps(m, Options{Variant: After, Preempt: PreemptFull, Point: func() {
		n++
		var l []int
		for i, v := range vs {
			if v.RefCnt.Load() > 1 {
				l = append(l, i)
			}
		}
		locked = append(locked, l)
	}})
	if _, err := f.Read(); err != nil {
		t.Fatal(err)
	}
	for i := range vs {
		if len(locked[i]) != 1 || locked[i][0] != i {
			t.Errorf("point %d (line %d): read-locked VMAs %v, want [%d]", i, i, locked[i], i)
		}
	}
	if last := locked[len(locked)-1]; len(last) != 0 {
		t.Errorf("back to user space holding VMA locks %v", last)
	}
	for _, v := range vs {
		if v.RefCnt.Load() != 1 {
			t.Fatalf("vm_refcnt %d after the read", v.RefCnt.Load())
		}
	}
}

// The After walk's RCU read section spans the chunk (lock_vma_range to
// m_stop): a reader that switched out between two VMAs of a chunk is inside
// it, which rcu.ReadUnlock reports.
func TestRCUSectionSpansTheChunk(t *testing.T) {
	t.Parallel()
	m := piecesMM(t, 5)
	second := m.VMAs()[1].Start
	sys := sched.NewSystem(1)
	defer sys.Stop()
	got := make(chan any)
	sys.Spawn(0, 0, func(th *sched.Thread) {
		defer func() { got <- recover() }()
		f := mustOpenMaps(m, Options{Variant: After, Thread: th})
		f.SetBrokenSkip(func(start uint64, _ bool) bool {
			if start == second {
				th.Block(func() {}) // a context switch between two VMAs
			}
			return false
		})
		f.Read()
	})
	if p := <-got; p == nil || !strings.Contains(p.(string), "classic RCU read section") {
		t.Fatalf("a context switch inside the chunk went unnoticed: %v", p)
	}
}

// fatalWaiter has a fatal signal pending and notes when a lock makes it
// sleep.
type fatalWaiter struct {
	fatal chan struct{}
	slept chan struct{}
	once  atomic.Bool
}

func (w *fatalWaiter) Fatal() <-chan struct{} { return w.fatal }
func (w *fatalWaiter) CPU() int               { return -1 }
func (w *fatalWaiter) Block(wait func()) {
	if w.once.CompareAndSwap(false, true) {
		close(w.slept)
	}
	wait()
}

// lock_next_vma's fallback takes the mmap read lock killably
// (mmap_read_lock_killable in lock_next_vma_under_mmap_lock): a reader with
// a fatal signal pending gets EINTR instead of sleeping behind the writer.
func TestFallbackIsKillable(t *testing.T) {
	t.Parallel()
	m := piecesMM(t, 3)
	vs := m.VMAs()
	m.MmapWriteLock(nil)
	m.VMAStartWrite(vs[0]) // the first VMA cannot be read-locked: fall back
	w := &fatalWaiter{fatal: make(chan struct{}), slept: make(chan struct{})}
	close(w.fatal)
	done := make(chan error, 1)
	go func() {
		_, err := mustOpenMaps(m, Options{Variant: After, Waiter: w}).Read()
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, errno.EINTR) {
			t.Errorf("read: %v, want EINTR", err)
		}
	case <-w.slept:
		t.Error("the fallback slept for the mmap lock with a fatal signal pending")
		m.MmapWriteUnlock()
		<-done
		return
	}
	m.MmapWriteUnlock()
}

// A VMA found detached is looked up again until its writer is done, as
// lock_next_vma does; the reader does not fall back to the mmap lock for it.
func TestDetachedVMARetried(t *testing.T) {
	t.Parallel()
	m := piecesMM(t, 3)
	v := m.VMAs()[1]
	v.RefCnt.Store(0) // as vma_mark_detached leaves it before the tree is published
	var fellBack atomic.Bool
	started := make(chan struct{})
	got := make(chan *mm.VMA)
	go func() {
		close(started)
		l, err := m.LockNextVMA(nil, v.Start, func(before bool) {
			if before && fellBack.CompareAndSwap(false, true) {
				v.RefCnt.Store(1)
			}
		})
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	<-started
	for range 1000 {
		runtime.Gosched()
	}
	v.RefCnt.CompareAndSwap(0, 1) // the writer is done: attached again
	if l := <-got; l != v {
		t.Fatalf("got %p, want the VMA", l)
	}
	if fellBack.Load() {
		t.Error("fell back to the mmap lock for a detached VMA")
	}
	m.VMAEndRead(v)
}
