package procfs_test

import (
	"testing"

	"mmlab/explore"
	"mmlab/procfs"
)

// The explorer's seed-003 properties can fail: with the After walk made to
// skip the VMA at 0x10004000 (the arena's third piece), every maps read
// and the query of that page report the gap.
func TestExplorerFindsSkippedVMA(t *testing.T) {
	broken := func(w *explore.World) {
		w.MapsOpened = func(f *procfs.MapsFile) {
			f.SetBrokenSkip(func(start uint64, _ bool) bool { return start == 0x10004000 })
		}
	}
	for _, c := range []struct {
		scenario string
		prop     explore.Property
	}{{"maps-vs-modify", explore.PropMapsGap}, {"query-vs-modify", explore.PropQueryGap}} {
		rep, err := explore.Explore(explore.Lookup(c.scenario).WithSetup(broken), explore.Options{Design: explore.After, Schedules: 10, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Failure == nil || rep.Failure.Violation.Property != c.prop {
			t.Errorf("%s: %d schedules, %+v; want %s", c.scenario, rep.Schedules, rep.Failure, c.prop)
		}
	}
}
