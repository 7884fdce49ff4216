package explore

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"mmlab/errno"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/mm/pgtable"
	"mmlab/procfs"
	"mmlab/sched"
	"mmlab/uapi"
)

// Seed 003's arena: arenaPieces anonymous VMAs of two pages each from
// arenaBase, alternately rw- and r-- so that they do not merge, and a spare
// page far above, which the remap moves in.
const (
	arenaBase   = 0x10000000
	arenaPieces = 6
	piecePages  = 2
	arenaEnd    = arenaBase + arenaPieces*piecePages*pgtable.PageSize
	sparePage   = 0x20000000
	anonFixed   = mm.MAP_PRIVATE | mm.MAP_ANONYMOUS | mm.MAP_FIXED
)

func pieceStart(i int) uint64 { return arenaBase + uint64(i)*piecePages*pgtable.PageSize }

func pieceProt(i int) int {
	if i%2 == 0 {
		return mm.PROT_READ | mm.PROT_WRITE
	}
	return mm.PROT_READ
}

// arena maps the pieces and the spare page in a new mm of ns and design d
// on a machine with features f.
func arena(ns *mm.Namespace, f machine.Features, d Design) *mm.MM {
	m := newMM(ns, f, d)
	for i := range arenaPieces {
		if _, err := m.Mmap(nil, pieceStart(i), piecePages*pgtable.PageSize, pieceProt(i), anonFixed, nil, 0); err != nil {
			panic(err)
		}
	}
	if _, err := m.Mmap(nil, sparePage, pgtable.PageSize, mm.PROT_READ|mm.PROT_EXEC, anonFixed, nil, 0); err != nil {
		panic(err)
	}
	return m
}

// modify splits, resizes and remaps VMAs of the arena, each time leaving
// every address of [arenaBase, arenaEnd) mapped before and after: a split
// (mprotect of a piece's first page to its neighbour's protection, then
// back), a resize (the last piece grows in place past arenaEnd and shrinks
// back) and a remap (the spare page moved onto a piece's second page with
// mremap(MREMAP_MAYMOVE|MREMAP_FIXED), then mapped again).
func modify(t *kernel.Task, m *mm.MM) error {
	page := uint64(pgtable.PageSize)
	k := arenaPieces / 2
	if err := m.Mprotect(t, pieceStart(k), page, pieceProt(k+1)); err != nil {
		return err
	}
	if err := m.Mprotect(t, pieceStart(k), page, pieceProt(k)); err != nil {
		return err
	}
	last := pieceStart(arenaPieces - 1)
	if _, err := m.Mremap(t, last, piecePages*page, (piecePages+1)*page, 0, 0); err != nil {
		return err
	}
	if _, err := m.Mremap(t, last, (piecePages+1)*page, piecePages*page, 0, 0); err != nil {
		return err
	}
	if _, err := m.Mremap(t, sparePage, page, page, mm.MREMAP_MAYMOVE|mm.MREMAP_FIXED, pieceStart(1)+page); err != nil {
		return err
	}
	_, err := m.Mmap(t, sparePage, page, mm.PROT_READ|mm.PROT_EXEC, anonFixed, nil, 0)
	return err
}

// procfsVariant is seed 003's design: the fixes of the mremap gap are
// after it.
func procfsVariant(d Design) procfs.Variant {
	if d == Before {
		return procfs.Before
	}
	return procfs.After
}

// gapFix is the mremap gap's fix of design d.
func gapFix(d Design) mm.GapFix {
	switch d {
	case Fix:
		return mm.GapFixGather
	case QueryFix:
		return mm.GapFixQueryConfirm
	}
	return mm.GapFixNone
}

// newMM is a new address space of design d on a machine with features f.
func newMM(ns *mm.Namespace, f machine.Features, d Design) *mm.MM {
	m, err := mm.NewWith(ns, f, mm.Config{GapFix: gapFix(d)})
	if err != nil {
		panic(err) // gapFix gives a design
	}
	return m
}

// mapsScenario is a seed-003 race: the modifier of the arena and a reader
// whose read runs on the reader's thread, twice; a complaint of read fails
// prop.
func mapsScenario(name, doc string, prop Property, read func(f *procfs.MapsFile) string) *Scenario {
	return &Scenario{Name: name, Seed: "003", Doc: doc, Props: []Property{prop, PropDeadlock}, gapFixes: true,
		build: func(w *World) { mapsRace(w, prop, read) }}
}

// mapsRace is the build of a mapsScenario.
func mapsRace(w *World, prop Property, read func(f *procfs.MapsFile) string) {
	m := arena(&w.Mach.NS.MM, w.Mach.Desc.Features, w.Design)
	w.task("modifier", 0, func(t *kernel.Task) {
		if err := modify(t, m); err != nil {
			w.fail(PropProgress, "modify: %v", err)
		}
	})
	reader := w.Mach.NewTask("reader")
	w.start(reader, 1, func(r *kernel.Runner) {
		f, err := procfs.OpenMaps(m, procfs.Options{Variant: procfsVariant(w.Design), Waiter: reader, Thread: r.Thread(),
			Point: func() { sched.At("m_next", "maps walk") }})
		if err != nil {
			w.fail(PropProgress, "%v", err)
			return
		}
		w.mapsOpened(f)
		for range 2 {
			f.Rewind()
			if d := read(f); d != "" {
				w.fail(prop, "%s", d)
				return
			}
		}
	})
}

// readGaps reads the whole maps file and reports the first address of the
// arena no line covers.
func readGaps(f *procfs.MapsFile) string {
	text, err := f.ReadAll(nil)
	if err != nil {
		return fmt.Sprintf("read: %v", err)
	}
	var spans [][2]uint64
	for line := range bytes.Lines(text) {
		var v uapi.VMA
		if err := uapi.ParseLine(bytes.TrimSuffix(line, []byte("\n")), &v); err != nil {
			return fmt.Sprintf("line %q: %v", line, err)
		}
		spans = append(spans, [2]uint64{v.Start, v.End})
	}
	slices.SortFunc(spans, func(a, b [2]uint64) int { return cmpU(a[0], b[0]) })
	cur := uint64(arenaBase)
	for _, s := range spans {
		if s[0] > cur && cur < arenaEnd {
			break
		}
		cur = max(cur, s[1])
	}
	if cur < arenaEnd {
		return fmt.Sprintf("no VMA shown at %#x, mapped throughout; the read showed:\n%s", cur, text)
	}
	return ""
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// queryGaps asks PROCMAP_QUERY for every page of the arena.
func queryGaps(f *procfs.MapsFile) string {
	for a := uint64(arenaBase); a < arenaEnd; a += pgtable.PageSize {
		q := uapi.ProcmapQuery{Size: uapi.SizeofProcmapQuery, QueryAddr: a}
		err := f.Query(&q, nil, nil)
		if errors.Is(err, errno.ENOENT) {
			return fmt.Sprintf("PROCMAP_QUERY(%#x): ENOENT, mapped throughout", a)
		}
		if err != nil {
			return fmt.Sprintf("PROCMAP_QUERY(%#x): %v", a, err)
		}
		if q.VMAStart > a || q.VMAEnd <= a {
			return fmt.Sprintf("PROCMAP_QUERY(%#x) returned %#x-%#x, which does not cover it", a, q.VMAStart, q.VMAEnd)
		}
	}
	return ""
}

var mapsVsModify = mapsScenario("maps-vs-modify",
	"a /proc/PID/maps reader reads while another task splits, resizes and remaps VMAs", PropMapsGap, readGaps)

var queryVsModify = mapsScenario("query-vs-modify",
	"PROCMAP_QUERY of every page of a range while another task splits, resizes and remaps its VMAs", PropQueryGap, queryGaps)
