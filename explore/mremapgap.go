package explore

import (
	"bytes"
	"errors"
	"fmt"

	"mmlab/errno"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/mm/pgtable"
	"mmlab/procfs"
	"mmlab/sched"
	"mmlab/uapi"
)

// The mremap gap (issue 25): mremap(MREMAP_MAYMOVE|MREMAP_FIXED) onto a
// mapped range unmaps the destination (mm/mremap.c:mremap_to, do_munmap)
// before move_vma stores the moved VMA, so for a moment the range is empty
// in the tree. A reader under per-VMA locks that arrives then takes the
// next VMA lock_next_vma finds above it, if nothing write-locked is in the
// way. The layouts below are the table of the issue; each modifier changes
// the destination gapMoves times, and the pages of [lo, hi) stay mapped
// throughout (the spare's own page, which each move leaves unmapped until
// it is mapped again, is outside them).

// gapMoves is how many times a modifier moves a page onto the destination.
const gapMoves = 2

// Gap layout addresses: the left page, the destination, the right page,
// and a spare page far above them.
const (
	gapLeft  = 0x10000000
	gapDst   = gapLeft + pgtable.PageSize
	gapRight = gapDst + pgtable.PageSize
	gapEnd   = gapRight + pgtable.PageSize
	gapFar   = 0x20000000
)

const (
	protRW = mm.PROT_READ | mm.PROT_WRITE
	protRX = mm.PROT_READ | mm.PROT_EXEC
	protR  = mm.PROT_READ
)

// GapLayout is one row of the table: the arena it maps, what its
// modifier does, the range mapped throughout, and whether the after design
// may show a gap there to a text read and to PROCMAP_QUERY.
type GapLayout struct {
	Name string
	Doc  string
	// Lo and Hi bound the pages mapped throughout.
	Lo, Hi uint64
	// TextGap and QueryGap: the table (and v6.19's code) says the
	// after design shows the gap to a text read, to a query.
	TextGap, QueryGap bool
	// maps are the arena's mmaps, in order; spare is the page each move
	// moves onto gapDst (0: the modifier does not mremap); write says the
	// spare is written before each move (it then carries an anon_vma and
	// its pgoff, and merges with no neighbour).
	maps  []gapMap
	spare uint64
	prot  int // the spare's protection
	write bool
	fixed bool // the modifier maps over gapDst with MAP_FIXED instead
}

type gapMap struct {
	addr, pages uint64
	prot        int
}

// GapLayouts are the layouts of the table, in its order.
var GapLayouts = []*GapLayout{
	{Name: "far", Doc: "a written spare far away moves onto the destination, its own VMA between two untouched ones",
		Lo: gapLeft, Hi: gapEnd, TextGap: true, QueryGap: true,
		maps:  []gapMap{{gapLeft, 1, protRW}, {gapDst, 1, protRX}, {gapRight, 1, protR}},
		spare: gapFar, prot: protRW, write: true},
	{Name: "adjacent", Doc: "a written spare just left of the destination (not merged with it) moves onto it",
		Lo: gapDst, Hi: gapEnd, TextGap: true, QueryGap: true,
		maps:  []gapMap{{gapLeft, 1, protRW}, {gapDst, 1, protRX}, {gapRight, 1, protR}},
		spare: gapLeft, prot: protRW, write: true},
	{Name: "split", Doc: "an unwritten spare moves onto the second page of a two-page VMA, splitting it, and merges back",
		Lo: gapLeft, Hi: gapEnd, TextGap: false, QueryGap: true,
		maps:  []gapMap{{gapLeft, 2, protRW}, {gapRight, 1, protR}},
		spare: gapFar, prot: protRW},
	{Name: "merged", Doc: "an unwritten spare just right of the destination, merged with it, moves onto it: the unmap splits their VMA",
		Lo: gapLeft, Hi: gapRight, TextGap: false, QueryGap: false,
		maps:  []gapMap{{gapLeft, 1, protR}, {gapDst, 2, protRW}},
		spare: gapRight, prot: protRW},
	{Name: "fixed", Doc: "mmap(MAP_FIXED) over the destination instead of mremap",
		Lo: gapLeft, Hi: gapEnd, TextGap: false, QueryGap: false,
		maps:  []gapMap{{gapLeft, 1, protRW}, {gapDst, 1, protRX}, {gapRight, 1, protR}},
		fixed: true, prot: protRX},
	{Name: "none", Doc: "no modifier",
		Lo: gapLeft, Hi: gapEnd,
		maps: []gapMap{{gapLeft, 1, protRW}, {gapDst, 1, protRX}, {gapRight, 1, protR}}},
}

// LookupGapLayout returns the layout named name, nil if there is none.
func LookupGapLayout(name string) *GapLayout {
	for _, l := range GapLayouts {
		if l.Name == name {
			return l
		}
	}
	return nil
}

// arena maps the layout's VMAs and its spare in a new mm.
func (l *GapLayout) arena() *mm.MM {
	m := mm.New(machine.Host().Features)
	for _, g := range l.maps {
		if _, err := m.Mmap(nil, g.addr, g.pages*pgtable.PageSize, g.prot, anonFixed, nil, 0); err != nil {
			panic(err)
		}
	}
	if l.spare != 0 && l.spare != gapLeft && l.spare != gapRight {
		if _, err := m.Mmap(nil, l.spare, pgtable.PageSize, l.prot, anonFixed, nil, 0); err != nil {
			panic(err)
		}
	}
	return m
}

// modify is the layout's modifier: gapMoves times, write the spare if the
// layout says so, move it onto gapDst with
// mremap(MREMAP_MAYMOVE|MREMAP_FIXED) and map it again (or map over gapDst
// with MAP_FIXED).
func (l *GapLayout) modify(t *kernel.Task, m *mm.MM) error {
	page := uint64(pgtable.PageSize)
	for range gapMoves {
		if l.fixed {
			if _, err := m.Mmap(t, gapDst, page, l.prot, anonFixed, nil, 0); err != nil {
				return err
			}
			continue
		}
		if l.write {
			if err := m.StoreByte(t, l.spare, 1); err != nil {
				return err
			}
		}
		if _, err := m.Mremap(t, l.spare, page, page, mm.MREMAP_MAYMOVE|mm.MREMAP_FIXED, gapDst); err != nil {
			return err
		}
		if _, err := m.Mmap(t, l.spare, page, l.prot, anonFixed, nil, 0); err != nil {
			return err
		}
	}
	return nil
}

// PropTextMiss: a maps-text read never misses a VMA that covers an
// address both before and after the operation.
const PropTextMiss Property = "a maps-text read never misses a VMA mapped before and after"

// gapScenario is a reader (text or PROCMAP_QUERY) against layout l's
// modifier. The reader runs with PreemptFull, so that the deterministic
// scheduler, which runs one task at a time, can stop it between two VMAs
// of a read: where a reader on another CPU of the kernel runs on while the
// modifier does.
func gapScenario(l *GapLayout, query bool) *Scenario {
	kind, prop, doc := "text", PropTextMiss, "a /proc/PID/maps text reader"
	if query {
		kind, prop, doc = "query", PropQueryGap, "PROCMAP_QUERY of every page mapped throughout"
	}
	return &Scenario{Name: "mremap-" + kind + "-" + l.Name, Seed: "003",
		Doc: doc + " twice, while: " + l.Doc, Props: []Property{prop, PropDeadlock},
		build: func(w *World) { gapRace(w, l, query, prop) }}
}

// gapRace is the build of a gapScenario.
func gapRace(w *World, l *GapLayout, query bool, prop Property) {
	m := l.arena()
	if l.spare != 0 || l.fixed {
		w.task("modifier", 0, func(t *kernel.Task) {
			if err := l.modify(t, m); err != nil {
				w.fail(PropProgress, "modify: %v", err)
			}
		})
	}
	reader := kernel.NewTask("reader")
	w.start(reader, 1, func(r *kernel.Runner) {
		var f *procfs.MapsFile
		f = procfs.OpenMaps(m, procfs.Options{Variant: procfsVariant(w.Design), Preempt: procfs.PreemptFull,
			Waiter: reader, Thread: r.Thread(), Point: func() { readerPoint(f, query) }})
		for range 2 {
			d := ""
			if query {
				d = queryRange(f, l.Lo, l.Hi)
			} else {
				d = textMiss(f, l.Lo, l.Hi)
			}
			if d != "" {
				w.fail(prop, "%s", d)
				return
			}
		}
	})
}

// readerPoint names the reader's preemption point by what it holds: the
// VMA read lock lock_next_vma took (the After walk, as show_map_vma formats
// that VMA's line), the mmap read lock (Before, or After's fallback), or
// nothing (the way back to user space, or before the fallback).
func readerPoint(f *procfs.MapsFile, query bool) {
	switch h := f.Holding(); {
	case h == mm.VMALockName:
		sched.At("show_map_vma", "VMA read-locked by lock_next_vma")
	case h != "":
		sched.At("show_map_vma", h+" read-held")
	case query:
		sched.At("PROCMAP_QUERY", "returns")
	default:
		sched.At("m_stop", "locks dropped")
	}
}

// textMiss reads the whole maps text and reports the first page of [lo,
// hi) no line covers, naming where the walk resumed (the end of the line
// before it: the After walk's last_pos) and the line it printed next.
func textMiss(f *procfs.MapsFile, lo, hi uint64) string {
	text, err := f.ReadAll(nil)
	if err != nil {
		return fmt.Sprintf("read: %v", err)
	}
	var prev, next *uapi.VMA
	for line := range bytes.Lines(text) {
		var v uapi.VMA
		if err := uapi.ParseLine(bytes.TrimSuffix(line, []byte("\n")), &v); err != nil {
			return fmt.Sprintf("line %q: %v", line, err)
		}
		if v.End <= lo {
			prev = &v
			continue
		}
		if v.Start > lo {
			next = &v
			break
		}
		prev, lo = &v, v.End
		if lo >= hi {
			return ""
		}
	}
	resumed, got := "the start", "nothing"
	if prev != nil {
		resumed = fmt.Sprintf("%#x (the end of %#x-%#x, last_pos)", prev.End, prev.Start, prev.End)
	}
	if next != nil {
		got = fmt.Sprintf("%#x-%#x", next.Start, next.End)
	}
	return fmt.Sprintf("no line covers %#x, mapped throughout: the walk resumed at %s and lock_next_vma gave %s; the read showed:\n%s",
		lo, resumed, got, text)
}

// queryRange asks PROCMAP_QUERY for every page of [lo, hi).
func queryRange(f *procfs.MapsFile, lo, hi uint64) string {
	for a := lo; a < hi; a += pgtable.PageSize {
		q := uapi.ProcmapQuery{Size: uapi.SizeofProcmapQuery, QueryAddr: a}
		err := f.Query(&q, nil, nil)
		switch {
		case errors.Is(err, errno.ENOENT):
			return fmt.Sprintf("PROCMAP_QUERY(%#x): ENOENT, mapped throughout", a)
		case err != nil:
			return fmt.Sprintf("PROCMAP_QUERY(%#x): %v", a, err)
		case q.VMAStart > a || q.VMAEnd <= a:
			return fmt.Sprintf("PROCMAP_QUERY(%#x) returned %#x-%#x, which does not cover it", a, q.VMAStart, q.VMAEnd)
		}
	}
	return ""
}

// gapScenarios are the text and the query scenario of every layout.
var gapScenarios = func() []*Scenario {
	var scs []*Scenario
	for _, l := range GapLayouts {
		scs = append(scs, gapScenario(l, false), gapScenario(l, true))
	}
	return scs
}()
