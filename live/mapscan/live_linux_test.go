package mapscan

import (
	"context"
	"runtime"
	"testing"
	"time"

	"mmlab/experiment"
	"mmlab/experiment/mapscan"
	"mmlab/live"
)

// TestMain lets the test binary run the helper roles when Run re-executes it.
func TestMain(m *testing.M) { live.RunTests(m) }

// Each case runs against the kernel: the mapper times calls and the
// scanners finish passes; no helper process is left behind.
func TestRunLive(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("the helpers use CPUs 0 and 1: this machine has one")
	}
	var rs []mapscan.Result
	o := mapscan.NewOptions()
	o.Runs, o.Duration = 1, 200*time.Millisecond
	if err := Run(context.Background(), o, experiment.Env{}, func(r mapscan.Result) { rs = append(rs, r) }); err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(mapscan.Cases) {
		t.Fatalf("%d results, want %d", len(rs), len(mapscan.Cases))
	}
	for _, r := range rs {
		t.Logf("%+v", r)
		if r.Insufficient() || r.Ops == 0 || r.Target != experiment.Live || r.LockWaitMaxUS != nil {
			t.Errorf("%s: the mapper timed no calls, or the row is wrong: %+v", r.Scanners, r)
		}
		if (r.Scanners == "none") != (r.ScanPasses == 0) {
			t.Errorf("%s: %d scan passes", r.Scanners, r.ScanPasses)
		}
	}
}

// One run splits its calls between mmap and munmap.
func TestRunOnce(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("the helpers use CPUs 0 and 1: this machine has one")
	}
	st, err := runOnce(context.Background(), mapscan.RunSpec{Scanners: "none", Duration: 100 * time.Millisecond, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if st.MmapOps == 0 || st.MunmapOps == 0 {
		t.Errorf("%+v", st)
	}
}

// A cancelled run returns promptly and kills its helpers.
func TestRunLiveCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := runOnce(ctx, mapscan.RunSpec{Scanners: "text", Duration: time.Hour}); err == nil {
		t.Fatal("a cancelled run succeeded")
	}
}
