package procfs_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"mmlab/experiment"
	"mmlab/experiment/maptear"
	"mmlab/machine"
	"mmlab/procfs"
)

// brokenSpace is the model's maptear space whose After walk, once armed,
// skips the VMA after the chunk boundary in the text and the VMA covering
// the queried address in PROCMAP_QUERY, as a broken walk would. It learns
// those VMAs from the calibration: the observations and the queries before
// and after the modification. Armed by Start (the free run), or with
// inModified by Modify and disarmed by Restore (the calibration's modified
// reading).
type brokenSpace struct {
	*maptear.ModelSpace
	inModified bool
	armed      atomic.Bool
	learning   bool
	next       []uint64 // starts of the first VMA after the boundary
	queried    []uint64 // starts of the VMA at the queried address
}

func (s *brokenSpace) Observe() (maptear.Boundary, error) {
	b, err := s.ModelSpace.Observe()
	if s.learning && !s.armed.Load() {
		s.next = append(s.next, b.First.Start)
	}
	return b, err
}

func (s *brokenSpace) Query(addr uint64) (maptear.Span, bool, error) {
	v, found, err := s.ModelSpace.Query(addr)
	if s.learning && !s.armed.Load() {
		s.queried = append(s.queried, v.Start)
	}
	return v, found, err
}

func (s *brokenSpace) Modify() error {
	s.armed.Store(s.inModified)
	return s.ModelSpace.Modify()
}

func (s *brokenSpace) Restore() error {
	err := s.ModelSpace.Restore()
	if s.inModified {
		s.armed.Store(false)
	}
	return err
}

func (s *brokenSpace) Start() error {
	s.armed.Store(!s.inModified)
	return s.ModelSpace.Start()
}

func (s *brokenSpace) skip(start uint64, query bool) bool {
	if !s.armed.Load() {
		return false
	}
	if !query {
		return slices.Contains(s.next, start)
	}
	return slices.Contains(s.queried, start)
}

// runBroken runs the check of o on s and returns its results, what the
// verbose mode printed and the error.
func runBroken(t *testing.T, s *brokenSpace, o *maptear.Options) ([]maptear.Result, []string, error) {
	t.Helper()
	s.MapsFile().SetBrokenSkip(s.skip)
	defer s.MapsFile().SetBrokenSkip(nil)
	var res []maptear.Result
	var log []string
	err := maptear.Check(context.Background(), s, o, experiment.Row{},
		func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) },
		func(r maptear.Result) { res = append(res, r) })
	return res, log, err
}

// With the After walk made to skip a VMA once the modifier runs free, each
// check of proc-maps-race.c reports it: the gap, the pairing of the two
// boundary lines, the split's change in unison, and each case's query
// check; the verbose mode prints the lines around the boundary.
func TestMaptearCatchesSkippedVMA(t *testing.T) {
	t.Parallel()
	for _, c := range maptear.Cases {
		ms, err := maptear.NewModelSpace(machine.MustNamed("x86-64"), procfs.After)
		if err != nil {
			t.Fatal(err)
		}
		s := &brokenSpace{ModelSpace: ms, learning: true}
		res, log, err := runBroken(t, s, &maptear.Options{Cases: []string{c}, File: "maps", Reads: 200, Verbose: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			t.Logf("%+v", r)
			// A read whose second chunk starts with the boundary VMA
			// reported again (a duplicate) skips nothing mapped.
			if r.Gaps == 0 || r.Gaps+r.Duplicates < r.Reads {
				t.Errorf("%s: the gap went unnoticed: %+v", r.Case, r)
			}
			if r.Unexpected+r.Duplicates < r.Reads {
				t.Errorf("%s: the pairing of the boundary lines missed a skipped line: %+v", r.Case, r)
			}
			if c == "split" && r.Unison == 0 {
				t.Errorf("split: lines not changing in unison went unnoticed: %+v", r)
			}
			if r.QueryGaps+r.QueryWrong != r.Queries {
				t.Errorf("%s: the query check missed a skipped VMA: %+v", r.Case, r)
			}
		}
		if !slices.ContainsFunc(log, func(l string) bool { return strings.Contains(l, "page boundary") }) ||
			!slices.ContainsFunc(log, func(l string) bool { return strings.Contains(l, "invalid") || strings.Contains(l, "missing") }) {
			t.Errorf("%s: the verbose mode printed no failed boundary: %q", c, log)
		}
	}
}

// Skipping the VMA after the boundary in the modified state of the
// calibration changes resize's first line, which proc-maps-race.c's
// check_shrink_result refuses ("first line unchanged").
func TestMaptearResizeCalibrationCatchesSkippedVMA(t *testing.T) {
	t.Parallel()
	ms, err := maptear.NewModelSpace(machine.MustNamed("x86-64"), procfs.After)
	if err != nil {
		t.Fatal(err)
	}
	s := &brokenSpace{ModelSpace: ms, inModified: true}
	// The VMA after the boundary: the first line of a plain reading.
	b, err := ms.Observe()
	if err != nil {
		t.Fatal(err)
	}
	s.next = []uint64{b.First.Start}
	_, _, err = runBroken(t, s, &maptear.Options{Cases: []string{"resize"}, File: "maps", Reads: 10})
	if err == nil || !strings.Contains(err.Error(), "first line") {
		t.Fatalf("resize calibrated with the first line changed: %v", err)
	}
}
