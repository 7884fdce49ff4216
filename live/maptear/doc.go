// Package maptear runs the /proc/PID/maps tearing check against the live
// kernel, after tools/testing/selftests/proc/proc-maps-race.c: a child
// process keeps changing a VMA that straddles the boundary between two
// read() chunks of its maps text (split/merge, shrink/grow, remap), while
// the reader reads the two lines on either side of the boundary and asks
// PROCMAP_QUERY about the changing address. A VMA may be reported twice or
// in its old or new form, but an address mapped throughout must never be
// missing (a gap), and the query must return the old or the new VMA.
//
// The child is a re-execution of the running binary: any program that
// imports this package becomes the child when started with the environment
// variable MMLAB_MAPTEAR_CHILD set (see child_linux.go).
package maptear

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Cases are the three modifications of proc-maps-race.c, in its order.
var Cases = []string{"split", "resize", "remap"}

// Options sets how long each case runs: until Reads observations, or for
// Duration, whichever comes first; with neither set, for one second.
type Options struct {
	Cases []string // default: all of Cases
	// File is the file read: "maps" (the default), or "smaps", whose text
	// has each VMA's counters after its line (proc-maps-race.c has both).
	File     string
	Reads    int
	Duration time.Duration
	// Pin runs the reader on CPU 0 and the modifier on CPU 1, so that they
	// always overlap (with fewer than two CPUs it does nothing).
	Pin bool

	// dropNext is a test hook: during the free run, report the second line
	// of the second chunk as its first, as a reader that skips a VMA would.
	dropNext bool
	// afterRead is a test hook called after each observation.
	afterRead func()
}

// CaseResult is what one case saw. Gaps, Unexpected, QueryGaps and
// QueryWrong must all be 0.
type CaseResult struct {
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
	// Unexpected counts boundary lines that are neither the old nor the new
	// form of their VMA.
	Unexpected int `json:"unexpected"`
	// Queries is the number of PROCMAP_QUERY lookups of the changing
	// address; QueryGaps of them found nothing (ENOENT), QueryWrong found a
	// VMA that is neither the old nor the new one.
	Queries    int `json:"queries"`
	QueryGaps  int `json:"query_gaps"`
	QueryWrong int `json:"query_wrong"`
}

// Failed reports whether r saw anything the kernel promises never happens.
func (r CaseResult) Failed() bool {
	return r.Gaps+r.Unexpected+r.QueryGaps+r.QueryWrong > 0
}

// Fields returns r as the key field and metrics of a report.Result row:
// "case", "file", "reads", "modified", "duplicates", "gaps", "unexpected",
// "queries", "query_gaps", "query_wrong".
func (r CaseResult) Fields() map[string]any {
	return map[string]any{
		"case":        r.Case,
		"file":        r.File,
		"reads":       r.Reads,
		"modified":    r.Modified,
		"duplicates":  r.Duplicates,
		"gaps":        r.Gaps,
		"unexpected":  r.Unexpected,
		"queries":     r.Queries,
		"query_gaps":  r.QueryGaps,
		"query_wrong": r.QueryWrong,
	}
}

// Prepare checks o and fills its defaults: every case, the maps file, one
// second per case. Both targets' runs start with it.
func (o *Options) Prepare() error {
	if len(o.Cases) == 0 {
		o.Cases = Cases
	}
	for _, c := range o.Cases {
		if !slices.Contains(Cases, c) {
			return fmt.Errorf("maptear: unknown case %q (cases: %s)", c, strings.Join(Cases, ", "))
		}
	}
	switch o.File {
	case "":
		o.File = "maps"
	case "maps", "smaps":
	default:
		return fmt.Errorf("maptear: file %q: want maps or smaps", o.File)
	}
	if o.Reads == 0 && o.Duration == 0 {
		o.Duration = time.Second
	}
	return nil
}

// RunCases runs each of o.Cases with run, in order, until ctx is cancelled or
// a case fails, and returns the results so far.
func (o *Options) RunCases(ctx context.Context, run func(name string) (CaseResult, error)) ([]CaseResult, error) {
	var results []CaseResult
	for _, name := range o.Cases {
		if err := ctx.Err(); err != nil {
			return results, err
		}
		res, err := run(name)
		if err != nil {
			return results, fmt.Errorf("maptear: case %s: %w", name, err)
		}
		results = append(results, res)
	}
	return results, nil
}
