package calibrate

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"

	"mmlab/live"
	"mmlab/machine"
)

// small is a quick calibration: 3 runs of a tenth of the operations.
var small = Options{Runs: 3, Scale: 0.1, PairsPerClass: 1, Progress: func(string, ...any) {}}

func needRoot(t *testing.T) {
	t.Helper()
	if !live.IsRoot() {
		t.Skip("calibrate measures as root (it pins threads at SCHED_FIFO); run the test as root")
	}
	if cpus, err := AllowedCPUs(); err != nil || len(cpus) < 2 {
		t.Skipf("calibrate needs two CPUs; this process may run on %v (%v)", cpus, err)
	}
}

// Each measurement gives a positive figure per run. No bound is asserted
// on a figure, only what holds whatever the host: a pipe hand-off makes
// two syscalls and membarrier is one, so each takes longer than a null
// syscall.
func TestMeasurements(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	cpus, _ := AllowedCPUs()
	a, b := cpus[0], cpus[1]
	get := func(name string, ns []float64, err error) float64 {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(ns) != small.Runs {
			t.Fatalf("%s: %d runs, want %d", name, len(ns), small.Runs)
		}
		for _, v := range ns {
			if !(v > 0) {
				t.Errorf("%s: a run measured %v ns", name, v)
			}
		}
		return Summarize(name, "", ns).Median
	}
	ns, err := Syscall(ctx, small, a)
	sys := get("syscall", ns, err)
	ns, err = LockedRMW(ctx, small, a)
	get("locked_rmw", ns, err)
	ns, err = PipeHandoff(ctx, small, a, a)
	if cs := get("context_switch", ns, err); cs <= sys {
		t.Errorf("a pipe hand-off (%v ns) took no longer than one syscall (%v ns)", cs, sys)
	}
	ns, err = PipeHandoff(ctx, small, a, b)
	get("wakeup", ns, err)
	ns, err = Membarrier(ctx, small, a, b)
	if m := get("membarrier", ns, err); m <= sys {
		t.Errorf("membarrier (%v ns) took no longer than getppid (%v ns)", m, sys)
	}
	ns, err = PageFault(ctx, small, a)
	get("page_fault", ns, err)
	ns, err = Populate(ctx, small, a)
	get("populate_page", ns, err)
	ns, err = LineHandoff(ctx, small, a, b)
	get("line", ns, err)
	for _, idle := range []time.Duration{0, time.Millisecond} {
		ns, err = AfterIdle(ctx, small, a, idle)
		get(fmt.Sprintf("openat after %v idle", idle), ns, err)
	}
	if runtime.GOARCH == "amd64" {
		var forks []float64
		ns, forks, err = Fork(ctx, small, a, 0)
		fork0 := get("fork", ns, err)
		if want := len(ns) * batches * forkCount(small, 0); len(forks) != want || slices.ContainsFunc(forks, func(v float64) bool { return v <= 0 }) {
			t.Errorf("fork: %d intervals, want %d, each positive", len(forks), want)
		}
		ns, _, err = Fork(ctx, small, a, forkPages)
		if f := get("fork with pages", ns, err); f <= fork0 {
			t.Errorf("a fork with %d present pages (%v ns) took no longer than one without (%v ns)", forkPages, f, fork0)
		}
	}
}

// Run gives a description of this host that the machine package accepts
// as the host's: complete, each cost with a calibrate source, loadable
// from the file Write writes.
func TestRun(t *testing.T) {
	needRoot(t)
	var lines int
	o := small
	o.Runs = 2
	o.Progress = func(string, ...any) { lines++ }
	c, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if lines == 0 {
		t.Error("no progress")
	}
	if err := c.Description.Costs.Validate(); err != nil {
		t.Error(err)
	}
	path := filepath.Join(t.TempDir(), "host.json")
	if err := Write(path, c); err != nil {
		t.Fatal(err)
	}
	d, err := machine.LoadHost(path)
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "host" || !reflect.DeepEqual(d.Costs, c.Description.Costs) || d.Topology.CPUs < 2 {
		t.Errorf("LoadHost = %+v", d)
	}
	if p := c.Description.PostIdle.Points; len(p) != len(idleLengths) || p[0].IdleNS != float64(idleLengths[0]) {
		t.Errorf("post-idle points %+v, want one at each of %v", p, idleLengths)
	}
	if len(c.Measurements) < 8 {
		t.Errorf("%d measurements kept", len(c.Measurements))
	}
}

// An interrupted Run stops with the context's error.
func TestRunInterrupted(t *testing.T) {
	needRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, small); !errors.Is(err, context.Canceled) {
		t.Errorf("Run of a cancelled context: %v", err)
	}
}

// forkSamples keeps evenly spaced quantiles of the intervals, each less
// the given time and at least 0, and all of them when they are few.
func TestForkSamples(t *testing.T) {
	var v []float64
	for i := range 4096 {
		v = append(v, float64(4096-i)) // 4096 down to 1
	}
	got := forkSamples(v, 1.5)
	if len(got) != forkSampleCount || got[0] != 1 || got[len(got)-1] != 4095 || !slices.IsSorted(got) {
		t.Errorf("%d samples from %v to %v, sorted %v", len(got), got[0], got[len(got)-1], slices.IsSorted(got))
	}
	if got := forkSamples([]float64{30, 10, 20}, 15); !slices.Equal(got, []float64{0, 5, 15}) {
		t.Errorf("forkSamples of three = %v, want [0 5 15]", got)
	}
}
