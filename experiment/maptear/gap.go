package maptear

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"mmlab/experiment"
	"mmlab/explore"
	"mmlab/sched"
	"mmlab/uapi"
)

// The mremap gap (docs/mremap-gap.md): mremap(MREMAP_MAYMOVE|MREMAP_FIXED) onto a
// mapped range unmaps the destination before it stores the moved VMA
// (mm/mremap.c:mremap_to, do_munmap, then move_vma), and a reader under
// per-VMA locks can arrive in between. The gap cases run the layouts of the
// issue's table (explore.GapLayouts, the explorer's scenarios): a modifier
// changes the destination back to back while the reader reads the whole
// maps text and asks PROCMAP_QUERY about the destination, counting reads
// that miss a page mapped throughout (gaps) and queries answered ENOENT
// (query_gaps). In the far, adjacent and split layouts a gap is what v6.19
// does, measured, not a failure of the check; in the merged, MAP_FIXED and
// no-modifier layouts, and on the before design of the model, a gap fails
// it.

// GapCases are the gap cases, "gap-" and a layout's name, in the table's
// order. They are not among the default cases.
var GapCases = func() []string {
	var cs []string
	for _, l := range explore.GapLayouts {
		cs = append(cs, "gap-"+l.Name)
	}
	return cs
}()

// GapBase is where both targets place a gap layout: below the Go heap
// arenas at 0xc000000000 and above the pieces (regionBases of the live
// child); a layout's far spare lies 256 MiB above it.
const GapBase = 0x600000000

// gapLayout returns the layout of gap case c, nil if c is not one.
func gapLayout(c string) *explore.GapLayout {
	name, ok := strings.CutPrefix(c, "gap-")
	if !ok {
		return nil
	}
	return explore.LookupGapLayout(name)
}

// IsGap reports whether case c is a gap case.
func IsGap(c string) bool { return gapLayout(c) != nil }

// GapSpace is a Space that can also hold a gap layout: BeginGap maps it at
// GapBase (with the space's page size) and makes the modifier Start runs
// change it (explore.GapPlan.Modify) until Stop; ReadText reads the whole
// maps text, one read() per chunk; EndGap unmaps the layout.
type GapSpace interface {
	Space
	BeginGap(l *explore.GapLayout) (explore.GapPlan, error)
	ReadText() ([]byte, error)
	EndGap() error
}

// checkGap runs gap case res.Case on s: the modifier runs free while the
// reader reads the text and queries the destination, once each per read.
func checkGap(ctx context.Context, s Space, o *Options, res *Result) error {
	gs, ok := s.(GapSpace)
	if !ok {
		return fmt.Errorf("this target cannot run the gap cases")
	}
	p, err := gs.BeginGap(gapLayout(res.Case))
	if err != nil {
		return err
	}
	lo, hi := p.Mapped()
	// With the modifier stopped, the text covers the range and the query
	// finds the destination.
	text, err := gs.ReadText()
	if err != nil {
		return err
	}
	if miss := TextMiss(text, lo, hi); miss != 0 {
		return fmt.Errorf("with the modifier stopped, no line covers %#x:\n%s", miss, text)
	}
	if _, found, err := s.Query(p.Dst()); err != nil || !found {
		return fmt.Errorf("with the modifier stopped, PROCMAP_QUERY(%#x): found %v, %v", p.Dst(), found, err)
	}
	if err := s.Start(); err != nil {
		return err
	}
	deadline := sched.Now().Add(o.Duration.D()) // as checkCase's
	var runErr error
	for o.Reads == 0 || res.Reads < o.Reads {
		if runErr = ctx.Err(); runErr != nil || (o.Duration > 0 && sched.Now().After(deadline)) {
			break
		}
		if text, runErr = gs.ReadText(); runErr != nil {
			break
		}
		res.Reads++
		if TextMiss(text, lo, hi) != 0 {
			res.Gaps++
		}
		v, found, err := s.Query(p.Dst())
		if runErr = err; err != nil {
			break
		}
		res.Queries++
		switch {
		case !found:
			res.QueryGaps++
		case v.Start > p.Dst() || v.End <= p.Dst():
			res.QueryWrong++
		}
	}
	if err := s.Stop(); err != nil && runErr == nil {
		runErr = fmt.Errorf("modifier: %w", err)
	}
	if err := gs.EndGap(); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

// TextMiss returns the first address of [lo, hi) that no line of the maps
// text covers, 0 if every one is covered.
func TextMiss(text []byte, lo, hi uint64) uint64 {
	for line := range bytes.Lines(text) {
		var v uapi.VMA
		if uapi.ParseLine(bytes.TrimSuffix(line, []byte("\n")), &v) != nil || v.End <= lo {
			continue
		}
		if v.Start > lo {
			return lo
		}
		if lo = v.End; lo >= hi {
			return 0
		}
	}
	return lo
}

// gapExpected reports whether a gap is what the target and variant of r do
// in its layout: v6.19 and the model's after design in the layouts the
// table marks (the text's in far and adjacent, the query's also in split).
func gapExpected(r Result, query bool) bool {
	l := gapLayout(r.Case)
	if r.Target.IsModel() && r.Variant == "before" {
		return false
	}
	if query {
		return l.QueryGap
	}
	return l.TextGap
}

// gapFailed reports whether gap result r saw what no kernel does: a gap
// where the table has none, or a query answer that does not cover the
// destination.
func gapFailed(r Result) bool {
	return r.QueryWrong > 0 || r.Gaps > 0 && !gapExpected(r, false) || r.QueryGaps > 0 && !gapExpected(r, true)
}

// GapLine is the verdict of the gap cases of rs on target t ("" if none
// ran there): the share of queries answered ENOENT and of text reads that
// missed the destination, over the layouts the table marks for each.
func GapLine(rs []Result, t experiment.Target) string {
	var queries, enoent, reads, misses, ran int
	for _, r := range rs {
		if !IsGap(r.Case) || r.Target != t || r.Variant == "before" {
			continue
		}
		ran++
		if gapExpected(r, true) {
			queries, enoent = queries+r.Queries, enoent+r.QueryGaps
		}
		if gapExpected(r, false) {
			reads, misses = reads+r.Reads, misses+r.Gaps
		}
	}
	if ran == 0 {
		return ""
	}
	who := "this kernel"
	switch t {
	case experiment.Model:
		who = "the model (after)"
	case experiment.Sim:
		who = "the model on the simulated machine (after)"
	}
	if enoent+misses == 0 {
		return fmt.Sprintf("%s does not expose a gap during mremap onto a mapped range (%d queries, %d text reads)", who, queries, reads)
	}
	return fmt.Sprintf("%s exposes a gap during mremap onto a mapped range: %s of queries, %s of text reads",
		who, pct(enoent, queries), pct(misses, reads))
}

// pct is "12.3% (N of M)".
func pct(n, of int) string {
	if of == 0 {
		return "none"
	}
	return fmt.Sprintf("%.1f%% (%d of %d)", 100*float64(n)/float64(of), n, of)
}
