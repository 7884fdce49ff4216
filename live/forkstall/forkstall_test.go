package forkstall

import (
	"context"
	"os"
	"testing"
)

func noAttach(ctx context.Context, path string, offsets []uint64, mode string) (func() error, error) {
	return func() error { return nil }, nil
}

func TestMain(m *testing.M) {
	ChildMain()
	os.Exit(m.Run())
}

func TestLongestIn(t *testing.T) {
	forks := []forkRecord{{10, 5}, {20, 50}, {30, 7}, {45, 100}, {60, 1}}
	maxNs, n := longestIn(forks, [2]int64{0, 25}, [2]int64{40, 50})
	if maxNs != 100 || n != 3 {
		t.Errorf("longestIn = %d, %d; want 100, 3", maxNs, n)
	}
	if maxNs, n := longestIn(forks, [2]int64{100, 200}); maxNs != 0 || n != 0 {
		t.Errorf("empty window = %d, %d", maxNs, n)
	}
	// A window is half-open: a fork starting at its end is outside.
	if _, n := longestIn(forks, [2]int64{0, 10}); n != 0 {
		t.Errorf("fork at window end counted")
	}
}

func TestVerdict(t *testing.T) {
	for _, c := range []struct {
		x, y float64
		want string
	}{
		{1100, 1.8, "stalls"},
		{40, 1, "ok"},   // over 10x but under 50 ms
		{600, 61, "ok"}, // over 50 ms but under 10x
		{611, 61, "stalls"},
		{0.5, 0.3, "ok"},
	} {
		if got := Verdict(c.x, c.y); got != c.want {
			t.Errorf("Verdict(%v, %v) = %s, want %s", c.x, c.y, got, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	o := Options{Case: "nope", Mode: ModeMulti1, Attach: noAttach}
	if o.Validate() == nil {
		t.Error("unknown case accepted")
	}
	o = Options{Case: CaseBusyMaps, Mode: ModePerf4, Attach: noAttach}
	if err := o.Validate(); err != nil || o.Runs != 9 || o.Size != 2<<30 {
		t.Errorf("defaults: %v %+v", err, o)
	}
}
