package mm

import (
	"errors"
	"fmt"
	"testing"

	"mmlab/design"
	"mmlab/mm/pgtable"
	"mmlab/sched"
)

// NewWith refuses an unset GapFix and keeps the one it is given; a fork's
// child runs in its parent's.
func TestNewWithGapFix(t *testing.T) {
	if _, err := NewWith(new(Namespace), testFeatures, Config{}); !errors.Is(err, design.ErrUnset) {
		t.Errorf("NewWith of an unset GapFix: %v, want design.ErrUnset", err)
	}
	if g := New(new(Namespace), testFeatures).GapFix(); g != GapFixNone {
		t.Errorf("New: %s, want %s", g, GapFixNone)
	}
	for _, g := range GapFixes.Values() {
		m, err := NewWith(new(Namespace), testFeatures, Config{GapFix: g})
		if err != nil {
			t.Fatal(err)
		}
		c, err := m.Fork(nil)
		if err != nil {
			t.Fatal(err)
		}
		if m.GapFix() != g || c.GapFix() != g {
			t.Errorf("NewWith(%s): %s, its fork %s", g, m.GapFix(), c.GapFix())
		}
	}
}

// At every scheduling decision of mremap(MREMAP_MAYMOVE|MREMAP_FIXED) onto
// a mapped page, a lock-free lookup of the tree (an RCU reader's) finds a
// VMA at the destination in the GapFixGather design, and one that is
// write-locked whenever it is a gathered one (marked detached): a
// per-VMA-lock reader falls back to mmap_read_lock there. In v6.19's design
// the destination is empty at some decision (mremap_to, between do_munmap
// and move_vma), which the check reports.
func TestGatherKeepsDestination(t *testing.T) {
	const pg = pgtable.PageSize
	dst, spare := uint64(arena+pg), uint64(arena+0x10*pg)
	for _, g := range []GapFix{GapFixNone, GapFixGather} {
		m, err := NewWith(new(Namespace), testFeatures, Config{GapFix: g})
		if err != nil {
			t.Fatal(err)
		}
		mmapAnon(t, m, 0, 3, PROT_READ)
		if err := m.Mprotect(nil, dst, pg, PROT_READ|PROT_WRITE); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Mmap(nil, spare, pg, rw, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED, nil, 0); err != nil {
			t.Fatal(err)
		}
		if err := m.StoreByte(nil, spare, 1); err != nil {
			t.Fatal(err)
		}
		check := func() error {
			v := m.Tree().Load(dst)
			switch {
			case v == nil:
				return fmt.Errorf("no VMA at %#x", dst)
			case v.RefCnt.Load() == 0 && !m.VMAIsWriteLocked(v):
				return fmt.Errorf("the gathered VMA %#x-%#x is not write-locked", v.Start, v.End)
			}
			return nil
		}
		sys := sched.New(sched.Config{CPUs: 1, Deterministic: true, Check: check})
		sys.SpawnNamed("mremap", 0, 0, func(*sched.Thread) {
			if _, err := m.Mremap(nil, spare, pg, pg, MREMAP_MAYMOVE|MREMAP_FIXED, dst); err != nil {
				t.Error(err)
			}
		})
		_, err = sys.Run()
		if want := g == GapFixNone; errors.Is(err, sched.ErrCheck) != want {
			t.Errorf("%s: %v, want a gap: %v", g, err, want)
		}
	}
}
