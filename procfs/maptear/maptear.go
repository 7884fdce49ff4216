// Package maptear runs the /proc/PID/maps tearing check of the kernel's
// proc-maps-race.c against the model's two maps walks (procfs.Before and
// procfs.After), with the cases, counts and verdicts of the live check in
// mmlab/live/maptear: a modifier goroutine keeps changing a VMA that
// straddles the boundary between the first two read() chunks (split and
// merge, shrink and grow, a page remapped into its middle) while a reader
// reads the two lines on either side of the boundary and asks PROCMAP_QUERY
// about the changing address. A VMA may show twice or in its old or new
// form; a range mapped throughout must never be missing (a gap), and the
// query must find the old or the new VMA.
package maptear

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"mmlab/uapi"
	"sync"
	"time"

	"mmlab/errno"
	"mmlab/live/maptear"
	"mmlab/mm"
	"mmlab/procfs"
)

// The layout of proc-maps-race.c and of the live child: nPieces anonymous
// VMAs of piecePages pages, alternating read-write and read-only so that
// neighbours never merge, never touched.
const (
	nPieces    = 129
	piecePages = 3
	page       = 4096
	base       = 0x200000000
)

// Run runs the cases of opts on a model address space read with variant
// ("before" or "after") and returns what each saw.
func Run(ctx context.Context, variant string, opts maptear.Options) ([]maptear.CaseResult, error) {
	return run(ctx, procfs.Variant(variant), opts, false)
}

// run is Run; with broken, the free run's reader skips the VMA after the
// boundary and the one covering the queried address (procfs's BrokenSkip),
// as a broken walk would.
func run(ctx context.Context, variant procfs.Variant, opts maptear.Options, broken bool) ([]maptear.CaseResult, error) {
	if variant != procfs.Before && variant != procfs.After {
		return nil, fmt.Errorf("maptear: variant %q: want before or after", variant)
	}
	if err := opts.Prepare(); err != nil {
		return nil, err
	}
	if opts.File != "maps" {
		return nil, fmt.Errorf("maptear: the model has no %s file, only maps", opts.File)
	}
	m := mm.New()
	for i := range nPieces {
		prot := mm.PROT_READ | mm.PROT_WRITE
		if i%2 == 1 {
			prot = mm.PROT_READ
		}
		if _, err := m.Mmap(nil, base+uint64(i)*piecePages*page, piecePages*page, prot, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED, nil, 0); err != nil {
			return nil, err
		}
	}
	return opts.RunCases(ctx, func(name string) (maptear.CaseResult, error) {
		return runCase(ctx, m, variant, name, opts, broken)
	})
}

// modifier is the live child's modify/restore pair for one case.
type modifier struct {
	m          *mm.MM
	name       string
	addr, next uint64
	prot       int // of the VMA at addr
}

// spare is where the remap case keeps the page it moves in: above the
// pieces, in address order after both chunks read.
const spare = base + (nPieces+16)*piecePages*page

// spareProt is the protection of the spare page: not the boundary VMA's, so
// that it does not merge into it.
func (c *modifier) spareProt() int {
	if c.prot == mm.PROT_READ {
		return mm.PROT_READ | mm.PROT_WRITE
	}
	return mm.PROT_READ
}

const anonFixed = mm.MAP_PRIVATE | mm.MAP_ANONYMOUS | mm.MAP_FIXED

func (c *modifier) modify() error {
	switch c.name {
	case "split": // the first page anew with PROT_NONE
		_, err := c.m.Mmap(nil, c.addr, page, mm.PROT_NONE, anonFixed, nil, 0)
		return err
	case "resize": // shrink in place to one page
		_, err := c.m.Mremap(nil, c.addr, 3*page, page, 0, 0)
		return err
	case "remap": // move a spare page of the other protection onto the middle page
		_, err := c.m.Mremap(nil, spare, page, page, mm.MREMAP_MAYMOVE|mm.MREMAP_FIXED, c.addr+page)
		return err
	}
	return errno.EINVAL
}

func (c *modifier) restore() error {
	switch c.name {
	case "split":
		_, err := c.m.Mmap(nil, c.addr, page, c.prot, anonFixed, nil, 0)
		return err
	case "resize":
		_, err := c.m.Mremap(nil, c.addr, page, 3*page, 0, 0)
		return err
	case "remap": // the middle page back to the original protection (it
		// merges back), then a new spare page. The live child moves
		// the next VMA's last page with MREMAP_DONTUNMAP, which the
		// model lacks; a spare page far from the boundary keeps the
		// next VMA unchanged in the same way.
		if err := c.m.Mprotect(nil, c.addr+page, page, c.prot); err != nil {
			return err
		}
		_, err := c.m.Mmap(nil, spare, page, c.spareProt(), anonFixed, nil, 0)
		return err
	}
	return errno.EINVAL
}

func protOf(p uapi.Perm) int {
	prot := mm.PROT_NONE
	if p&uapi.PROCMAP_QUERY_VMA_READABLE != 0 {
		prot |= mm.PROT_READ
	}
	if p&uapi.PROCMAP_QUERY_VMA_WRITABLE != 0 {
		prot |= mm.PROT_WRITE
	}
	return prot
}

// reader reads the boundary the way proc-maps-race.c does.
type reader struct {
	f *procfs.MapsFile
}

func lineSpan(line []byte) (maptear.Span, error) {
	var v uapi.VMA
	if err := uapi.ParseLine(line, &v); err != nil {
		return maptear.Span{}, err
	}
	return maptear.SpanOf(&v), nil
}

// observe reads the last line of the first chunk and the first line of the
// second, each chunk with its own Read.
func (r *reader) observe() (last, first maptear.Span, err error) {
	r.f.Rewind()
	c, err := r.f.Read()
	if err != nil {
		return last, first, err
	}
	if len(c) == 0 {
		return last, first, errors.New("empty maps")
	}
	c = c[:len(c)-1]
	if last, err = lineSpan(c[bytes.LastIndexByte(c, '\n')+1:]); err != nil {
		return last, first, err
	}
	if c, err = r.f.Read(); err != nil {
		return last, first, err
	}
	if len(c) == 0 {
		return last, first, errors.New("maps ends at the first chunk")
	}
	first, err = lineSpan(c[:bytes.IndexByte(c, '\n')])
	return last, first, err
}

// query asks PROCMAP_QUERY for the VMA covering addr; found is false on ENOENT.
func (r *reader) query(addr uint64) (maptear.Span, bool, error) {
	q := uapi.ProcmapQuery{Size: uapi.SizeofProcmapQuery, QueryAddr: addr}
	err := r.f.Query(&q, nil, nil)
	if errors.Is(err, errno.ENOENT) {
		return maptear.Span{}, false, nil
	}
	if err != nil {
		return maptear.Span{}, false, err
	}
	return maptear.Span{Start: q.VMAStart, End: q.VMAEnd, Perm: uapi.Perm(q.VMAFlags)}, true, nil
}

// runCase calibrates the case with the modifier stopped (original, modified,
// restored), then lets a modifier goroutine modify and restore back to back
// while it observes.
func runCase(ctx context.Context, m *mm.MM, variant procfs.Variant, name string, opts maptear.Options, broken bool) (maptear.CaseResult, error) {
	res := maptear.CaseResult{Case: name, File: "maps"}
	rd := &reader{f: procfs.OpenMaps(m, procfs.Options{Variant: variant})}
	last0, first0, err := rd.observe()
	if err != nil {
		return res, err
	}
	if last0.End-last0.Start != piecePages*page || first0.Start != last0.End {
		return res, fmt.Errorf("the chunk boundary is not between two pieces: %+v | %+v", last0, first0)
	}
	mod := &modifier{m: m, name: name, addr: last0.Start, next: first0.Start, prot: protOf(last0.Perm)}
	if name == "remap" {
		if _, err := m.Mmap(nil, spare, page, mod.spareProt(), anonFixed, nil, 0); err != nil {
			return res, err
		}
		defer m.Munmap(nil, spare, page)
	}
	qaddr := mod.addr + page
	var hole maptear.Span
	if name == "resize" {
		qaddr = mod.addr
		hole = maptear.Span{Start: mod.addr + page, End: mod.addr + piecePages*page}
	}
	q0, ok0, err := rd.query(qaddr)
	if err != nil {
		return res, err
	}
	if err := mod.modify(); err != nil {
		return res, err
	}
	lastM, firstM, err := rd.observe()
	if err != nil {
		return res, err
	}
	qM, okM, err := rd.query(qaddr)
	if err != nil {
		return res, err
	}
	if err := mod.restore(); err != nil {
		return res, err
	}
	lastR, firstR, err := rd.observe()
	if err != nil {
		return res, err
	}
	if lastR != last0 || firstR != first0 {
		return res, fmt.Errorf("restoring did not bring back the boundary: %+v | %+v, was %+v | %+v", lastR, firstR, last0, first0)
	}
	if lastM == last0 || !ok0 || !okM {
		return res, fmt.Errorf("the modification did not show at the boundary (%+v | %+v) or the query found nothing", lastM, firstM)
	}
	c := maptear.Checker{
		LastRestored: last0, LastModified: lastM,
		FirstRestored: first0, FirstModified: firstM,
		QueryRestored: q0, QueryModified: qM,
		Mapped: maptear.Span{Start: last0.Start, End: first0.End},
		Hole:   hole,
	}
	if broken {
		skip := func(s uint64, query bool) bool {
			if query {
				return s == q0.Start || s == qM.Start
			}
			return s == first0.Start
		}
		rd = &reader{f: procfs.OpenMaps(m, procfs.Options{Variant: variant, BrokenSkip: skip})}
	}

	var stop sync.WaitGroup
	var stopping bool
	var mu sync.Mutex // protects stopping
	var modErr error
	stop.Add(1)
	go func() {
		defer stop.Done()
		for {
			mu.Lock()
			s := stopping
			mu.Unlock()
			if s {
				return
			}
			if modErr = mod.modify(); modErr != nil {
				return
			}
			if modErr = mod.restore(); modErr != nil {
				return
			}
		}
	}()
	deadline := time.Now().Add(opts.Duration)
	var runErr error
	for opts.Reads == 0 || res.Reads < opts.Reads {
		if ctx.Err() != nil || (opts.Duration > 0 && time.Now().After(deadline)) {
			break
		}
		last, first, err := rd.observe()
		if err != nil {
			runErr = err
			break
		}
		c.Observe(&res, last, first)
		v, found, err := rd.query(qaddr)
		if err != nil {
			runErr = err
			break
		}
		c.ObserveQuery(&res, v, found)
	}
	mu.Lock()
	stopping = true
	mu.Unlock()
	stop.Wait()
	if runErr == nil && modErr != nil {
		runErr = fmt.Errorf("modifier: %w", modErr)
	}
	return res, runErr
}
