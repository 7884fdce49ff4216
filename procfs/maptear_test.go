package procfs_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"mmlab/experiment"
	"mmlab/experiment/maptear"
	"mmlab/procfs"
)

// brokenSpace is the model's maptear space whose After walk, once the
// modifier runs free, skips the VMA after the chunk boundary in the text and
// the VMA covering the queried address in PROCMAP_QUERY, as a broken walk
// would. It learns those VMAs from the calibration: the observations and
// the queries before and after the modification.
type brokenSpace struct {
	*maptear.ModelSpace
	armed   atomic.Bool
	next    []uint64 // starts of the first VMA after the boundary
	queried []uint64 // starts of the VMA at the queried address
}

func (s *brokenSpace) Observe() (last, first maptear.Span, err error) {
	last, first, err = s.ModelSpace.Observe()
	if !s.armed.Load() {
		s.next = append(s.next, first.Start)
	}
	return last, first, err
}

func (s *brokenSpace) Query(addr uint64) (maptear.Span, bool, error) {
	v, found, err := s.ModelSpace.Query(addr)
	if !s.armed.Load() {
		s.queried = append(s.queried, v.Start)
	}
	return v, found, err
}

func (s *brokenSpace) Start() error {
	s.armed.Store(true)
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

// With the After walk made to skip a VMA, the maptear checker reports a gap
// in every read and every query but those that see a duplicate: the check
// can fail.
func TestMaptearCatchesSkippedVMA(t *testing.T) {
	for _, c := range maptear.Cases {
		ms, err := maptear.NewModelSpace(procfs.After)
		if err != nil {
			t.Fatal(err)
		}
		s := &brokenSpace{ModelSpace: ms}
		restore := procfs.SetBrokenSkip(s.skip)
		o := &maptear.Options{Cases: []string{c}, File: "maps", Reads: 200}
		var res []maptear.Result
		err = maptear.Check(context.Background(), s, o, experiment.Row{}, func(r maptear.Result) { res = append(res, r) })
		restore()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			t.Logf("%+v", r)
			// A read whose second chunk starts with the boundary VMA
			// reported again (a duplicate) skips nothing mapped.
			if r.Gaps == 0 || r.Gaps+r.Duplicates < r.Reads || r.QueryGaps != r.Queries {
				t.Errorf("%s: a walk that skips a VMA went unnoticed: %+v", r.Case, r)
			}
		}
	}
}
