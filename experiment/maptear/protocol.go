package maptear

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"mmlab/experiment"
	"mmlab/sched"
	"mmlab/uapi"
)

// The layout of proc-maps-race.c, on both targets: NPieces anonymous
// private VMAs of PiecePages pages each, alternating read-write and
// read-only so that neighbours never merge, never touched (no page faults,
// so a split piece can always merge back).
const (
	NPieces    = 129
	PiecePages = 3
)

// Protections, as mmap(2), mprotect(2) and mm take them (the same values on
// the model and on Linux).
const (
	protNone  = 0x0
	protRead  = 0x1
	protWrite = 0x2
	protExec  = 0x4
)

// ProtOf returns the mmap protection of a VMA whose PROCMAP_QUERY
// permissions are p.
func ProtOf(p uapi.Perm) int {
	prot := protNone
	if p&uapi.PROCMAP_QUERY_VMA_READABLE != 0 {
		prot |= protRead
	}
	if p&uapi.PROCMAP_QUERY_VMA_WRITABLE != 0 {
		prot |= protWrite
	}
	if p&uapi.PROCMAP_QUERY_VMA_EXECUTABLE != 0 {
		prot |= protExec
	}
	return prot
}

// Mapper is what a modification does to the address space that holds the
// pieces: the model's mm or, in the live child, system calls.
type Mapper interface {
	// MapAnon maps [addr, addr+length) anew: mmap(MAP_PRIVATE |
	// MAP_ANONYMOUS | MAP_FIXED) with prot.
	MapAnon(addr, length uint64, prot int) error
	// Resize resizes the mapping at addr in place: mremap without flags.
	Resize(addr, oldLen, newLen uint64) error
	// Mprotect is mprotect(2).
	Mprotect(addr, length uint64, prot int) error
	// MovePage moves the last page of the VMA at next (a piece of the
	// other protection) onto dst with mremap(MREMAP_MAYMOVE | MREMAP_FIXED
	// | MREMAP_DONTUNMAP), which leaves the VMA at next as it is.
	MovePage(dst, next uint64) error
}

// ErrUnknownCase is returned for a case name not in Cases.
var ErrUnknownCase = errors.New("unknown case")

// Mod is one case's modification of the boundary VMA [Addr, Addr +
// PiecePages*Page), whose protection is Prot and after which the VMA at
// Next starts: the three pairs of proc-maps-race.c.
type Mod struct {
	Case       string
	Addr, Next uint64
	Prot       int
	Page       uint64
}

// Modify changes the boundary VMA.
func (c *Mod) Modify(m Mapper) error {
	p := c.Page
	switch c.Case {
	case "split": // the first page anew, also executable: [addr,+1P) [addr+1P,+3P)
		return m.MapAnon(c.Addr, p, c.Prot|protExec)
	case "resize": // shrink in place to one page
		return m.Resize(c.Addr, PiecePages*p, p)
	case "remap": // the next VMA's last page onto the middle page
		return m.MovePage(c.Addr+p, c.Next)
	}
	return fmt.Errorf("%w %q", ErrUnknownCase, c.Case)
}

// Restore undoes Modify: the boundary VMA merges back into its original
// form.
func (c *Mod) Restore(m Mapper) error {
	p := c.Page
	switch c.Case {
	case "split": // the first page again with the original protection
		return m.MapAnon(c.Addr, p, c.Prot)
	case "resize": // grow back in place (the pages after it are free)
		return m.Resize(c.Addr, p, PiecePages*p)
	case "remap": // the middle page back to the original protection
		return m.Mprotect(c.Addr+p, p, c.Prot)
	}
	return fmt.Errorf("%w %q", ErrUnknownCase, c.Case)
}

// Space is an address space holding the pieces, as the check reads and
// changes it: the model's (ModelSpace) or a live child process's
// (mmlab/live/maptear). The check's protocol, Check, is written once over
// it.
type Space interface {
	// Pieces returns the range of the pieces and the page size.
	Pieces() (pieces Span, page uint64)
	// Observe reads the maps text the way proc-maps-race.c does and
	// returns the last line of the chunk that ends inside the pieces and
	// the first line of the next chunk, each chunk from its own read(),
	// with the text around them.
	Observe() (Boundary, error)
	// Query asks PROCMAP_QUERY for the VMA covering addr; found is false
	// when the answer is ENOENT.
	Query(addr uint64) (v Span, found bool, err error)
	// Begin chooses the modification that Modify, Restore and Start make.
	Begin(c Mod) error
	// Modify and Restore make the modification once, or undo it, before
	// returning.
	Modify() error
	Restore() error
	// Start makes the modifier modify and restore back to back, as fast as
	// it can and without waiting for the reader, until Stop, which returns
	// once it has stopped, restored, with the first error it met.
	Start() error
	Stop() error
}

// Check runs the tearing check of each of o.Cases on s, in order, and emits
// each case's result (with row) when it is complete, until ctx is cancelled
// or a case cannot run. With o.Verbose, log (nil: none) gets the lines
// around the boundary at each calibration step and when a check fails.
func Check(ctx context.Context, s Space, o *Options, row experiment.Row, log func(format string, args ...any), emit func(Result)) error {
	if !o.Verbose {
		log = nil
	}
	for _, name := range o.Cases {
		if err := ctx.Err(); err != nil {
			return err
		}
		res := Result{Row: row, Case: name, File: o.File}
		var err error
		if IsGap(name) {
			err = checkGap(ctx, s, o, &res)
		} else {
			err = checkCase(ctx, s, o, log, &res)
		}
		if ctx.Err() != nil { // interrupted: the case so far
			emit(res)
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("maptear: case %s: %w", name, err)
		}
		emit(res)
	}
	return nil
}

// maxReports is how many failed reads of a case the verbose mode prints.
const maxReports = 3

// printBoundary is proc-maps-race.c's print_boundaries: the title, the last
// lines of the first chunk and the first lines of the second.
func printBoundary(log func(string, ...any), title string, b Boundary) {
	if log == nil {
		return
	}
	log("%s", title)
	for line := range bytes.Lines(b.Before) {
		log("%s", bytes.TrimSuffix(line, []byte("\n")))
	}
	log("-----------------page boundary-----------------")
	for line := range bytes.Lines(b.After) {
		log("%s", bytes.TrimSuffix(line, []byte("\n")))
	}
}

// probe observes the boundary and queries addr (the original, modified and
// restored readings of capture_mod_pattern).
func probe(s Space, addr uint64) (b Boundary, q Span, found bool, err error) {
	if b, err = s.Observe(); err != nil {
		return b, q, false, err
	}
	q, found, err = s.Query(addr)
	return b, q, found, err
}

// checkCase calibrates the case with the modifier stopped (the boundary
// original, modified, restored: capture_mod_pattern and the case's
// vma_mod_check), then lets the modifier run free while it observes,
// counting into res.
func checkCase(ctx context.Context, s Space, o *Options, log func(string, ...any), res *Result) error {
	pieces, page := s.Pieces()
	b, err := s.Observe()
	if err != nil {
		return err
	}
	last, first := b.Last, b.First
	inPieces := func(v Span) bool { return v.Start >= pieces.Start && v.End <= pieces.End }
	if !inPieces(last) || !inPieces(first) || last.End-last.Start != PiecePages*page || first.Start != last.End {
		return fmt.Errorf("the chunk boundary is not between two pieces: %+v | %+v", last, first)
	}
	mod := Mod{Case: res.Case, Addr: last.Start, Next: first.Start, Prot: ProtOf(last.Perm), Page: page}
	qaddr := mod.Addr + page // split, remap: the middle page changes hands
	var hole Span
	if res.Case == "resize" {
		qaddr = mod.Addr
		hole = Span{Start: mod.Addr + page, End: mod.Addr + PiecePages*page}
	}
	if err := s.Begin(mod); err != nil {
		return err
	}
	var cal [3]Boundary // original, modified, restored
	var found [3]bool
	titles := [...]string{"Before modification", "After modification", "After restore"}
	for i, step := range []func() error{func() error { return nil }, s.Modify, s.Restore} {
		if err := step(); err != nil {
			return err
		}
		if cal[i], _, found[i], err = probe(s, qaddr); err != nil {
			return err
		}
		printBoundary(log, titles[i], cal[i])
	}
	b0, bM, bR := cal[0], cal[1], cal[2]
	if bR.Last != b0.Last || bR.First != b0.First || b0.Last != last || b0.First != first {
		return fmt.Errorf("restoring did not bring back the boundary: %+v | %+v, was %+v | %+v", bR.Last, bR.First, b0.Last, b0.First)
	}
	if !found[0] || !found[1] || !found[2] {
		return errors.New("the query found nothing with the modifier stopped")
	}
	// The case's vma_mod_check: split and remap change both boundary
	// lines; resize changes only the last ("first line unchanged").
	if bM.Last == b0.Last {
		return fmt.Errorf("the modification did not change the last line (%+v)", bM.Last)
	}
	if firstChanged := bM.First != b0.First; firstChanged != (res.Case != "resize") {
		return fmt.Errorf("the modification changed the first line: %v, want %v (%+v, was %+v)", firstChanged, res.Case != "resize", bM.First, b0.First)
	}
	c := Checker{
		Case: res.Case, Page: page,
		Last: b0.Last, First: b0.First,
		LastModified: bM.Last, FirstModified: bM.First,
		Mapped: Span{Start: b0.Last.Start, End: b0.First.End},
		Hole:   hole,
	}

	if err := s.Start(); err != nil {
		return err
	}
	deadline := sched.Now().Add(o.Duration.D()) // the model's clock: the host's but on a simulated machine
	var runErr error
	reports := 0
	for o.Reads == 0 || res.Reads < o.Reads {
		if runErr = ctx.Err(); runErr != nil || (o.Duration > 0 && sched.Now().After(deadline)) {
			break
		}
		b, err := s.Observe()
		if err != nil {
			runErr = err
			break
		}
		title := c.Observe(res, b)
		v, found, err := s.Query(qaddr)
		if err != nil {
			runErr = err
			break
		}
		if !c.ObserveQuery(res, v, found) && title == "" {
			title = fmt.Sprintf("query of %#x: %+v (found %v) invalid", qaddr, v, found)
		}
		if title != "" && reports < maxReports {
			reports++
			printBoundary(log, title, b)
		}
	}
	if err := s.Stop(); err != nil && runErr == nil {
		runErr = fmt.Errorf("modifier: %w", err)
	}
	return runErr
}
