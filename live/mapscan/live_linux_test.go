package mapscan

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"mmlab/experiment"
	"mmlab/experiment/mapscan"
	"mmlab/live"
	"mmlab/live/tracefs"
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
	o.Runs, o.Duration = 1, experiment.Duration(200*time.Millisecond)
	if err := Run(context.Background(), o, experiment.Env{}, func(r mapscan.Result) { rs = append(rs, r) }); err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(mapscan.Cases) {
		t.Fatalf("%d results, want %d", len(rs), len(mapscan.Cases))
	}
	for _, r := range rs {
		t.Logf("%+v", r)
		if r.Insufficient() || r.Ops == 0 || r.Target != experiment.Live || (r.LockWaitMaxUS == nil) != (r.LockTraceNote != "") {
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

// A cancelled run returns promptly and kills its helpers; cancelled while
// it traces, it leaves no ftrace instance behind.
func TestRunLiveCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := runOnce(ctx, mapscan.RunSpec{Scanners: "text", Duration: time.Hour}); err == nil {
		t.Fatal("a cancelled run succeeded")
	}
	if runtime.NumCPU() < 2 {
		t.Skip("the helpers use CPUs 0 and 1: this machine has one")
	}
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	var traced []string
	defer onTraceStarted(func() {
		traced = tracefs.Leftovers()
		cancel()
	})()
	if _, err := runOnce(ctx, mapscan.RunSpec{Scanners: "text", Duration: time.Hour}); err != context.Canceled {
		t.Fatalf("a run cancelled while tracing returned %v", err)
	}
	if in, err := tracefs.New("mono"); err == nil {
		in.Close()
		if len(traced) != 1 {
			t.Errorf("instances while tracing: %v, want one", traced)
		}
	}
	if left := tracefs.Leftovers(); len(left) > 0 {
		t.Errorf("the cancelled run left %v", left)
	}
}

// With text scanners the lock tracepoints give the live run the model's
// attribution, consistent within itself; without tracefs (or permission)
// the figures stay empty and the note says why. No instance is left.
func TestRunLiveLockTrace(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("the helpers use CPUs 0 and 1: this machine has one")
	}
	o := mapscan.NewOptions()
	o.Cases, o.Runs, o.Duration = []string{"text"}, 2, experiment.Duration(300*time.Millisecond)
	var rs []mapscan.Result
	if err := Run(context.Background(), o, experiment.Env{}, func(r mapscan.Result) { rs = append(rs, r) }); err != nil {
		t.Fatal(err)
	}
	if left := tracefs.Leftovers(); len(left) > 0 {
		t.Errorf("the runs left %v", left)
	}
	if len(rs) != 1 || rs[0].Ops == 0 {
		t.Fatalf("results %+v", rs)
	}
	r := rs[0]
	line := mapscan.Attribution(r)
	t.Log(line)
	if r.LockTraceNote != "" {
		if r.LockWaitMeanUS != nil || r.LockWaitMaxUS != nil || r.SlowestWaitUS != nil || r.ScannerSlept != nil {
			t.Errorf("untraced (%s), yet lock figures: %+v", r.LockTraceNote, r)
		}
		if !strings.Contains(line, r.LockTraceNote) {
			t.Errorf("the attribution does not give the note: %q", line)
		}
		return
	}
	if r.LockWaitMeanUS == nil || r.LockWaitMaxUS == nil || len(r.LockWaitMaxUSRuns) != o.Runs {
		t.Fatalf("traced, yet no lock figures: %+v", r)
	}
	// The trace's times are whole microseconds: a sleep's length is off by
	// less than 1 us.
	if *r.LockWaitMaxUS > r.OpMaxUS+1 {
		t.Errorf("the mapper's longest sleep %.1f us is longer than its slowest call %.1f us", *r.LockWaitMaxUS, r.OpMaxUS)
	}
	// A call sleeps at most twice on the mmap_lock: mmap's write lock, then
	// MAP_POPULATE's read lock.
	if *r.LockWaitMeanUS > 2**r.LockWaitMaxUS {
		t.Errorf("lock wait mean %.1f us over twice the longest sleep %.1f us", *r.LockWaitMeanUS, *r.LockWaitMaxUS)
	}
	// The slowest call's sleeps are taken within it.
	var slept float64
	for lock, w := range r.SlowestWaitUS {
		if w <= 0 {
			t.Errorf("the slowest call slept %.1f us on %s", w, lock)
		}
		slept += w
	}
	if slept > r.OpMaxUS {
		t.Errorf("the slowest call (%.1f us) slept %.1f us: %v", r.OpMaxUS, slept, r.SlowestWaitUS)
	}
	for lock, hs := range r.ScannerSlept {
		if lock != "mmap_lock" || hs.Count < 1 || hs.MaxUS < 0 {
			t.Errorf("scanners slept on %s: %+v", lock, hs)
		}
	}
	if !strings.Contains(line, "slowest call") || strings.Contains(line, "no lock tracepoints") {
		t.Errorf("attribution %q", line)
	}
}
