package explore

import (
	"bytes"
	"errors"
	"fmt"

	"mmlab/errno"
	"mmlab/kernel"
	"mmlab/locking"
	"mmlab/mm"
	"mmlab/mm/pgtable"
	"mmlab/procfs"
	"mmlab/sched"
	"mmlab/uapi"
)

// The mremap gap (docs/mremap-gap.md): mremap(MREMAP_MAYMOVE|MREMAP_FIXED) onto a
// mapped range unmaps the destination (mm/mremap.c:mremap_to, do_munmap)
// before move_vma stores the moved VMA, so for a moment the range is empty
// in the tree. A reader under per-VMA locks that arrives then takes the
// next VMA lock_next_vma finds above it, if nothing write-locked is in the
// way. The layouts below are the table of the issue; the explorer's
// modifier changes the destination gapMoves times, and the pages a layout
// says are mapped throughout stay so (the spare's own page, which each move
// leaves unmapped until it is mapped again, is outside them). The layouts
// are placed anywhere (GapPlan): maptear runs them on both targets.

// gapMoves is how many times the explorer's modifier moves a page onto the
// destination.
const gapMoves = 2

// Gap layout offsets from a layout's base, in pages: the left page, the
// destination, the right page, and a spare page far above them.
const (
	gapLeft  = 0
	gapDst   = 1
	gapRight = 2
	gapEnd   = 3
	gapFar   = 0x10000 // 256 MiB above the base with 4 KiB pages
)

// Protections, as mmap(2) takes them (the same on the model and Linux).
const (
	protRW = mm.PROT_READ | mm.PROT_WRITE
	protRX = mm.PROT_READ | mm.PROT_EXEC
	protR  = mm.PROT_READ
)

// GapLayout is one row of the table: the arena it maps, what its
// modifier does, the range mapped throughout, and whether the after design
// (and v6.19) shows a gap there to a text read and to PROCMAP_QUERY.
type GapLayout struct {
	Name string
	Doc  string
	// TextGap and QueryGap: the table says a text read, a query
	// of the destination, can miss the destination.
	TextGap, QueryGap bool
	// maps are the arena's mmaps, in order; spare is the page each move
	// moves onto the destination (-1: the modifier does not mremap);
	// write says the spare is written before each move (it then has an
	// anon_vma and keeps its pgoff, so it merges with no neighbour).
	maps   []gapMap
	lo, hi uint64 // pages mapped throughout
	spare  int64
	prot   int // the spare's protection, or the MAP_FIXED mapping's
	write  bool
	fixed  bool // the modifier maps over the destination with MAP_FIXED instead
}

type gapMap struct {
	page, pages uint64
	prot        int
}

// GapLayouts are the layouts of the table, in its order.
var GapLayouts = []*GapLayout{
	{Name: "far", Doc: "a written spare far away moves onto the destination, its own VMA between two untouched ones",
		TextGap: true, QueryGap: true, lo: gapLeft, hi: gapEnd,
		maps:  []gapMap{{gapLeft, 1, protRW}, {gapDst, 1, protRX}, {gapRight, 1, protR}},
		spare: gapFar, prot: protRW, write: true},
	{Name: "adjacent", Doc: "a written spare just left of the destination (not merged with it) moves onto it",
		TextGap: true, QueryGap: true, lo: gapDst, hi: gapEnd,
		maps:  []gapMap{{gapLeft, 1, protRW}, {gapDst, 1, protRX}, {gapRight, 1, protR}},
		spare: gapLeft, prot: protRW, write: true},
	{Name: "split", Doc: "an unwritten spare moves onto the second page of a two-page VMA, splitting it, and merges back",
		QueryGap: true, lo: gapLeft, hi: gapEnd,
		maps:  []gapMap{{gapLeft, 2, protRW}, {gapRight, 1, protR}},
		spare: gapFar, prot: protRW},
	{Name: "merged", Doc: "an unwritten spare just right of the destination, merged with it, moves onto it: the unmap splits their VMA",
		lo: gapLeft, hi: gapRight,
		maps:  []gapMap{{gapLeft, 1, protR}, {gapDst, 2, protRW}},
		spare: gapRight, prot: protRW},
	{Name: "fixed", Doc: "mmap(MAP_FIXED) over the destination instead of mremap",
		lo: gapLeft, hi: gapEnd,
		maps:  []gapMap{{gapLeft, 1, protRW}, {gapDst, 1, protRX}, {gapRight, 1, protR}},
		spare: -1, fixed: true, prot: protRX},
	{Name: "none", Doc: "no modifier",
		lo: gapLeft, hi: gapEnd,
		maps:  []gapMap{{gapLeft, 1, protRW}, {gapDst, 1, protRX}, {gapRight, 1, protR}},
		spare: -1},
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

// GapMapper is what a layout's setup and modifier do to an address space:
// the model's mm or a live process's system calls.
type GapMapper interface {
	// MapAnon is mmap(addr, length, prot, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED).
	MapAnon(addr, length uint64, prot int) error
	// Write stores a byte at addr (a write fault).
	Write(addr uint64) error
	// Move is mremap(src, page, page, MREMAP_MAYMOVE|MREMAP_FIXED, dst).
	Move(src, dst uint64) error
}

// GapPlan is a layout placed at a base address.
type GapPlan struct {
	*GapLayout
	Base, Page uint64
}

// Place places l at base with pages of page bytes.
func (l *GapLayout) Place(base, page uint64) GapPlan { return GapPlan{l, base, page} }

func (p GapPlan) at(pg uint64) uint64 { return p.Base + pg*p.Page }

// Dst is the destination's address.
func (p GapPlan) Dst() uint64 { return p.at(gapDst) }

// Mapped is the range mapped throughout.
func (p GapPlan) Mapped() (lo, hi uint64) { return p.at(p.lo), p.at(p.hi) }

// Modifies reports whether the layout has a modifier.
func (p GapPlan) Modifies() bool { return p.spare >= 0 || p.fixed }

// Span is the range the layout may map (the arena and its far spare).
func (p GapPlan) Span() (lo, hi uint64) {
	hi = p.at(gapEnd)
	if p.spare >= 0 {
		hi = max(hi, p.at(uint64(p.spare)+1))
	}
	return p.Base, hi
}

// Setup maps the layout's arena and its spare.
func (p GapPlan) Setup(m GapMapper) error {
	for _, g := range p.maps {
		if err := m.MapAnon(p.at(g.page), g.pages*p.Page, g.prot); err != nil {
			return err
		}
	}
	if p.spare >= gapEnd {
		return m.MapAnon(p.at(uint64(p.spare)), p.Page, p.prot)
	}
	return nil
}

// Modify changes the destination once: write the spare if the layout says
// so, move it onto the destination with mremap(MREMAP_MAYMOVE|MREMAP_FIXED)
// and map it again; or map over the destination with MAP_FIXED; or
// nothing.
func (p GapPlan) Modify(m GapMapper) error {
	switch {
	case p.fixed:
		return m.MapAnon(p.Dst(), p.Page, p.prot)
	case p.spare < 0:
		return nil
	}
	spare := p.at(uint64(p.spare))
	if p.write {
		if err := m.Write(spare); err != nil {
			return err
		}
	}
	if err := m.Move(spare, p.Dst()); err != nil {
		return err
	}
	return m.MapAnon(spare, p.Page, p.prot)
}

// Modelled is a model mm as a GapMapper, its calls made by T (may be nil).
type Modelled struct {
	M *mm.MM
	T locking.Waiter
}

func (x Modelled) MapAnon(addr, length uint64, prot int) error {
	_, err := x.M.Mmap(x.T, addr, length, prot, anonFixed, nil, 0)
	return err
}

func (x Modelled) Write(addr uint64) error { return x.M.StoreByte(x.T, addr, 1) }

func (x Modelled) Move(src, dst uint64) error {
	_, err := x.M.Mremap(x.T, src, pgtable.PageSize, pgtable.PageSize, mm.MREMAP_MAYMOVE|mm.MREMAP_FIXED, dst)
	return err
}

// gapBase is where the explorer places the layouts.
const gapBase = 0x10000000

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
		Doc: doc + " twice, while: " + l.Doc, Props: []Property{prop, PropDeadlock}, gapFixes: true,
		build: func(w *World) { gapRace(w, l, query, prop) }}
}

// gapRace is the build of a gapScenario.
func gapRace(w *World, l *GapLayout, query bool, prop Property) {
	p := l.Place(gapBase, pgtable.PageSize)
	m := newMM(&w.Mach.NS.MM, w.Mach.Desc.Features, w.Design)
	if err := p.Setup(Modelled{M: m}); err != nil {
		panic(err)
	}
	if p.Modifies() {
		w.task("modifier", 0, func(t *kernel.Task) {
			for range gapMoves {
				if err := p.Modify(Modelled{M: m, T: t}); err != nil {
					w.fail(PropProgress, "modify: %v", err)
					return
				}
			}
		})
	}
	lo, hi := p.Mapped()
	reader := w.Mach.NewTask("reader")
	w.start(reader, 1, func(r *kernel.Runner) {
		var f *procfs.MapsFile
		f, err := procfs.OpenMaps(m, procfs.Options{Variant: procfsVariant(w.Design), Preempt: procfs.PreemptFull,
			Waiter: reader, Thread: r.Thread(), Point: func() { readerPoint(f, query) }})
		if err != nil {
			w.fail(PropProgress, "%v", err)
			return
		}
		w.mapsOpened(f)
		for range 2 {
			d := ""
			if query {
				d = queryRange(f, lo, hi)
			} else {
				d = textMiss(f, lo, hi)
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
