// Package maptear is the /proc/PID/maps tearing check of seed 003, after
// the kernel's tools/testing/selftests/proc/proc-maps-race.c: a modifier
// keeps changing a VMA that straddles the boundary between two read()
// chunks of the maps text (split and merge, shrink and grow, a page remapped
// into its middle) while a reader reads the two lines on either side of the
// boundary and asks PROCMAP_QUERY about the changing address. A VMA may be
// reported twice or in its old or new form, but a range mapped throughout
// must never be missing (a gap), and the query must find the old or the new
// VMA.
//
// The package is the experiment's one definition (Def): its cases, options,
// typed result, checker, table and verdict, and the protocol both targets
// run (Check, over a Space): on the model's two maps walks (ModelSpace,
// procfs.Before and procfs.After) and, in mmlab/live/maptear, on a child
// process of the running kernel whose modifier loop runs in the child.
package maptear

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"mmlab/experiment"
	"mmlab/procfs"
	"mmlab/report"
)

// Cases are the three modifications of proc-maps-race.c, in its order.
var Cases = []string{"split", "resize", "remap"}

// Files are the files the check can read: maps, or smaps, whose text has
// each VMA's counters after its line (proc-maps-race.c has both). The model
// has only maps.
var Files = []string{"maps", "smaps"}

// Options are the check's flags; their JSON is the document's params.
type Options struct {
	Cases []string `json:"cases"`
	File  string   `json:"file"`
	// Each case runs until Reads observations (0: as many as Duration
	// allows), or for Duration (0: no limit), whichever ends first.
	Reads    int                 `json:"reads"`
	Duration experiment.Duration `json:"duration_ms"`
	// Pin runs the live reader on CPU 0 and the modifier on CPU 1, so that
	// they always overlap (with fewer than two CPUs it does nothing).
	Pin bool `json:"pin"`
	// Verbose prints the lines around the boundary at each calibration
	// step and when a check fails (proc-maps-race.c's VERBOSE=1); not a
	// param.
	Verbose bool `json:"-"`
}

// NewOptions returns the defaults: every case, maps, two seconds per case.
func NewOptions() *Options {
	return &Options{Cases: slices.Clone(Cases), File: "maps", Duration: experiment.Duration(2 * time.Second)}
}

// Flags registers the options on fs.
func (o *Options) Flags(fs *flag.FlagSet) {
	experiment.NamesVar(fs, &o.Cases, "cases", "comma-separated cases: "+strings.Join(Cases, ", ")+"; the mremap gap's layouts: "+strings.Join(GapCases, ", "), slices.Concat(Cases, GapCases)...)
	fs.StringVar(&o.File, "file", o.File, "the file read, "+strings.Join(Files, " or ")+" (the model has only maps)")
	fs.IntVar(&o.Reads, "reads", o.Reads, "reads per case (0: as many as --duration allows)")
	experiment.Var(fs, &o.Duration, "duration", "longest time per case (0: until --reads)")
	fs.BoolVar(&o.Pin, "pin", o.Pin, "live: run the reader on CPU 0 and the modifier on CPU 1")
	fs.BoolVar(&o.Verbose, "verbose", o.Verbose, "print the lines around the boundary at calibration and when a check fails")
}

// Validate checks every option.
func (o *Options) Validate() error {
	if o.File != "maps" && slices.ContainsFunc(o.Cases, IsGap) {
		return fmt.Errorf("--file %s: the gap cases read maps", o.File)
	}
	if err := experiment.OneOf("file", o.File, Files...); err != nil {
		return err
	}
	if o.Reads < 0 {
		return fmt.Errorf("--reads %d: want 0 (as many as --duration allows) or more", o.Reads)
	}
	if o.Duration < 0 {
		return fmt.Errorf("--duration %v: want 0 (until --reads) or more", o.Duration)
	}
	if o.Reads == 0 && o.Duration == 0 {
		return fmt.Errorf("--reads 0 with --duration 0: a case would never end; set either")
	}
	return nil
}

// Result is what one case saw on one target and variant. Gaps, Unexpected,
// Unison, QueryGaps and QueryWrong must all be 0.
type Result struct {
	experiment.Row
	Case string `json:"case"`
	File string `json:"file"` // maps or smaps
	// Reads is the number of observations: the two lines on either side of
	// the chunk boundary, each from its own read().
	Reads int `json:"reads"`
	// Modified counts reads whose last line showed the modified VMA, to show
	// that the race was exercised.
	Modified int `json:"modified"`
	// Duplicates counts reads in which the second line starts below the end
	// of the first: a range reported twice (allowed).
	Duplicates int `json:"duplicates"`
	// Gaps counts reads that skipped part of the range that stays mapped
	// throughout.
	Gaps int `json:"gaps"`
	// Unexpected counts reads whose two boundary lines are not a pair
	// proc-maps-race.c accepts: the modified last line with the modified
	// first line or the restored boundary VMA again, else both original.
	Unexpected int `json:"unexpected"`
	// Unison counts split reads in which only one of the two lines
	// changed from the original (proc-maps-race.c: "First and last lines
	// should change in unison").
	Unison int `json:"unison"`
	// Queries is the number of PROCMAP_QUERY lookups of the changing
	// address; QueryGaps of them found nothing (ENOENT), QueryWrong found a
	// VMA the case's check refuses (split: neither the original nor the
	// split's first line; resize: not at the start, or of neither three
	// pages nor one; remap: neither the original nor the page remapped).
	Queries    int `json:"queries"`
	QueryGaps  int `json:"query_gaps"`
	QueryWrong int `json:"query_wrong"`
	// Machine is the simulated machine's name (sim results only).
	Machine string `json:"machine,omitempty"`
}

// Failed reports whether r saw anything the kernel promises never happens.
// In a gap case, a gap where v6.19 shows one (see gap.go) is a measurement,
// not a failure.
func (r Result) Failed() bool {
	if IsGap(r.Case) {
		return gapFailed(r)
	}
	return r.Gaps+r.Unexpected+r.Unison+r.QueryGaps+r.QueryWrong > 0
}

// Judgement returns "TORN" if r failed, "insufficient" if it made no read
// (nothing was checked), "gap" for a gap case that saw the mremap gap
// where v6.19 shows it, else "ok".
func (r Result) Judgement() string {
	switch {
	case r.Failed():
		return "TORN"
	case r.Reads == 0:
		return "insufficient"
	case r.Gaps+r.QueryGaps > 0:
		return "gap"
	}
	return "ok"
}

// Def is the experiment's definition.
var Def = experiment.Def[*Options, Result]{
	Name:    "maptear",
	Seed:    "003",
	Summary: "can a /proc/PID/maps reader miss a VMA that changes under it?",
	Help: `usage: mmlab run maptear [--target model|live|both] [--variant before|after]
                        [--cases split,resize,remap] [--duration D] [--reads N]
                        [--file maps|smaps] [--pin] [--verbose] [--json]

The tearing check of the kernel's proc-maps-race.c, with each of its
checks. A process keeps changing a VMA that straddles the boundary between
two read() chunks of its /proc/PID/maps text: split and merge (split),
shrink and grow (resize), or the next VMA's last page remapped into its
middle with MREMAP_DONTUNMAP (remap). A reader reads the two lines on either
side of the boundary and asks PROCMAP_QUERY for the VMA at the changing
address. A VMA may be reported twice (duplicates), but a range mapped
throughout must never be missing (gaps); the two lines must pair as the
modified form (or the restored VMA again) or as the original (unexpected);
in split both lines change or neither (unison); and the query must find what
the case allows (query_gaps, query_wrong). All five must be 0; the exit
status is 1 if not, or if a case made no read (insufficient). The
calibration, with the modifier stopped, checks that the modification shows:
split and remap change both lines, resize only the last. modified counts the reads
that saw the change, showing that the race ran. Each case runs for
--duration or --reads reads, whichever ends first.
--file smaps reads /proc/PID/smaps instead (each VMA's line is followed by
its counters), the other variant of proc-maps-race.c; the query is the same.
--pin keeps the reader on CPU 0 and the modifier on CPU 1, so they overlap.
--verbose prints the three lines on each side of the boundary at each
calibration step and at the first failed checks of a case (VERBOSE=1).
The gap cases (--cases gap-far,gap-adjacent,gap-split,gap-merged,gap-fixed,
gap-none; not run by default) measure the mremap gap (docs/mremap-gap.md): in each
layout of its table a modifier moves a page onto a mapped destination with
mremap(MREMAP_MAYMOVE|MREMAP_FIXED) back to back (gap-fixed maps over it with
MAP_FIXED, gap-none does nothing) while the reader reads the whole maps text
and asks PROCMAP_QUERY about the destination: gaps counts text reads that
missed a page mapped throughout, query_gaps queries answered ENOENT. v6.19
shows the gap in far, adjacent (text and query) and split (query only): that
is measured, not a failure; a gap in the other layouts, or on the model's
before design, fails the check.
Sim (--target sim --machine NAME): the reader and the modifier on two
virtual CPUs in virtual time (--duration is virtual), each system call its
entry and exit, each line formatted and each query 250 instructions of
work, each modifier call 1000 (model choices).
The live target needs Linux 6.11+ (PROCMAP_QUERY).
`,
	Variants:   procfs.Variants.Names(),
	NewOptions: NewOptions,
	Settings: func() experiment.Settings {
		// proc-maps-race.c's cases and the mremap gap's layouts
		// (docs/mremap-gap.md).
		cases := strings.Join(slices.Concat(Cases, GapCases), ",")
		return experiment.Settings{
			Quick:    []string{"--reads", "2000", "--duration", "1s", "--cases", cases},
			Full:     []string{"--reads", "0", "--duration", "20s", "--cases", cases},
			Smoke:    []string{"--reads", "200", "--duration", "300ms", "--cases", cases},
			EstQuick: 25 * time.Second, EstFull: 7 * time.Minute,
		}
	},
	Model:   Model,
	Sim:     true,
	Table:   Table,
	Verdict: Verdict,
}

// Table prints one row per target, variant and case.
func Table(w io.Writer, _ *Options, rs []Result) {
	fmt.Fprintf(w, "maptear: /proc/PID/maps tearing check (%s)\n", report.ThisMachine().Kernel)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "target\tvariant\tfile\tcase\treads\tmodified\tduplicates\tgaps\tunexpected\tunison\tqueries\tquery_gaps\tquery_wrong\tverdict\t\n")
	for _, r := range rs {
		target := r.Target.Label(r.Machine)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", target, r.Variant, r.File, r.Case,
			r.Reads, r.Modified, r.Duplicates, r.Gaps, r.Unexpected, r.Unison, r.Queries, r.QueryGaps, r.QueryWrong, r.Judgement())
	}
	tw.Flush()
	for _, r := range rs {
		if IsGap(r.Case) {
			fmt.Fprintf(w, "%s %s %s: PROCMAP_QUERY ENOENT %s of queries, text misses %s of reads\n",
				r.Target, r.Variant, r.Case, pct(r.QueryGaps, r.Queries), pct(r.Gaps, r.Reads))
		}
	}
}

// Verdict is "torn" if any case saw a gap or an unexpected line or query,
// else "insufficient" if a case made no read, else "ok"; all but ok fail.
func Verdict(_ *Options, rs []Result) (string, bool) {
	var torn, none []string
	reads := 0
	for _, r := range rs {
		if !IsGap(r.Case) {
			reads += r.Reads
		}
		where := fmt.Sprintf("%s %s %s", r.Target, r.Variant, r.Case)
		switch r.Judgement() {
		case "TORN":
			torn = append(torn, where)
		case "insufficient":
			none = append(none, where)
		}
	}
	var gap []string
	for _, t := range []experiment.Target{experiment.Live, experiment.Model, experiment.Sim} {
		if l := GapLine(rs, t); l != "" {
			gap = append(gap, l)
		}
	}
	tail := ""
	if len(gap) > 0 {
		tail = "; " + strings.Join(gap, "; ")
		if !slices.ContainsFunc(rs, func(r Result) bool { return !IsGap(r.Case) }) && len(torn)+len(none) == 0 {
			return experiment.VerdictLine(strings.Join(gap, "; ")), false // the gap cases alone
		}
	}
	switch {
	case len(torn) > 0:
		return experiment.VerdictLine("torn (" + strings.Join(torn, ", ") + ")" + tail), true
	case len(none) > 0:
		return experiment.VerdictLine("insufficient: no read in " + strings.Join(none, ", ") + tail), true
	}
	return experiment.VerdictLine(fmt.Sprintf("ok (no gap in %d reads)", reads) + tail), false
}
