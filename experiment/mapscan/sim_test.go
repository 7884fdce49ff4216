package mapscan

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"mmlab/experiment"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/procfs"
)

// simEnv is a sim target's Env on seed 003's machine.
func simEnv(seed uint64) experiment.Env {
	return experiment.Env{Target: experiment.Sim, Sim: &experiment.SimRun{Seed: seed, Until: time.Hour},
		Machine: machine.MustNamed("virtme-ng-4"), Variants: procfs.Variants.Names(), Progress: func(string, ...any) {}}
}

func simSpec(d time.Duration) RunSpec {
	return RunSpec{Scanners: "text", Duration: d, Seed: 1, BusyDuration: BusySpin}
}

// runSim is one RunSim of o with variant v on seed 003's machine, with the
// sim seed seed; it fails the test on an error.
func runSim(t *testing.T, seed uint64, v procfs.Variant, o RunSpec) Stats {
	t.Helper()
	st, err := RunSim(context.Background(), machine.MustNamed("virtme-ng-4"), experiment.SimRun{Seed: seed, Until: time.Hour}, v, o)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// The same machine and seed give the same table, byte for byte.
func TestSimDeterministic(t *testing.T) {
	table := func(seed uint64) string {
		o := NewOptions()
		o.Cases, o.Runs, o.Duration, o.RawData = []string{"text"}, 2, experiment.Duration(50*time.Millisecond), true
		var rs []Result
		if err := Model(context.Background(), o, simEnv(seed), func(r Result) { rs = append(rs, r) }); err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Target != experiment.Sim || r.Machine != "virtme-ng-4" {
				t.Errorf("result on %s, machine %q: want sim on virtme-ng-4", r.Target, r.Machine)
			}
		}
		var b bytes.Buffer
		Table(&b, o, rs)
		return b.String()
	}
	a, b := table(1), table(1)
	if a != b {
		t.Fatalf("two runs with seed 1 differ:\n%s\n%s", a, b)
	}
	if !strings.Contains(a, "sim, text scanners: op_max_us before/after") {
		t.Errorf("no sim ratio line:\n%s", a)
	}
}

// Before, a scanner that slept on the mmap read lock is granted it while
// its busy-waiter keeps its CPU, and the mapper's slowest call waits for
// it on mmap_lock; after, the walk takes VMA locks and the slowest call
// waits on no mmap_lock.
func TestSimBeforeScannerDelaysMapper(t *testing.T) {
	before := runSim(t, 1, procfs.Before, simSpec(200*time.Millisecond))
	after := runSim(t, 1, procfs.After, simSpec(200*time.Millisecond))
	if before.MaxOpWaitUS["mmap_lock"] == 0 || before.ScannersSlept["mmap_lock"].Count == 0 {
		t.Errorf("before: slowest call waited %v, scanners slept %v: want the mapper delayed by a scanner on mmap_lock", before.MaxOpWaitUS, before.ScannersSlept)
	}
	if after.MaxOpWaitUS["mmap_lock"] != 0 {
		t.Errorf("after: slowest call waited %v on mmap_lock", after.MaxOpWaitUS)
	}
	if before.OpMaxUS <= after.OpMaxUS {
		t.Errorf("slowest call before %.1f us, after %.1f us: want before slower", before.OpMaxUS, after.OpMaxUS)
	}
	if before.ScanPasses == 0 || after.ScanPasses == 0 {
		t.Errorf("passes before %d, after %d", before.ScanPasses, after.ScanPasses)
	}
}

// With busy-waiters that never sleep, the fair class still gives each
// nice-15 scanner its weight's share: they finish passes (the real-time
// model's strict priorities would starve them).
func TestSimNice15ScannerGetsItsShare(t *testing.T) {
	o := simSpec(300 * time.Millisecond)
	o.BusyDuration = 0
	if st := runSim(t, 1, procfs.Before, o); st.ScanPasses == 0 {
		t.Error("no pass under busy-waiters that never sleep")
	}
}

// A simulated machine needs CPUs for the mapper and the scanners: 2.
func TestSimCPUs(t *testing.T) {
	d := machine.MustNamed("virtme-ng-4")
	d.Topology.CPUs = 1
	if _, err := RunSim(context.Background(), d, experiment.SimRun{Seed: 1, Until: time.Hour}, procfs.Before, simSpec(time.Millisecond)); err == nil {
		t.Error("ran on 1 CPU")
	}
	// On 2 CPUs the scanners and busy-waiters share CPU 1, as on the
	// live target: the scanners still make passes, and before, they still
	// stall the mapper on mmap_lock.
	d.Topology.CPUs = 2
	st, err := RunSim(context.Background(), d, experiment.SimRun{Seed: 1, Until: time.Hour}, procfs.Before, simSpec(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if st.ScanPasses == 0 || st.MaxOpWaitUS["mmap_lock"] == 0 {
		t.Errorf("2 CPUs: %d passes, slowest call waited %v: want passes and a wait on mmap_lock", st.ScanPasses, st.MaxOpWaitUS)
	}
}

// A sim run's Stats depend on nothing but the machine, the seed and the
// spec: two runs are equal.
func TestRunSimRepeats(t *testing.T) {
	a := runSim(t, 7, procfs.After, simSpec(30*time.Millisecond))
	b := runSim(t, 7, procfs.After, simSpec(30*time.Millisecond))
	if !reflect.DeepEqual(a, b) {
		t.Errorf("two runs differ:\n%+v\n%+v", a, b)
	}
}

// The sim settings parse, on a machine that can run them.
func TestSimSettings(t *testing.T) {
	s := Def.Settings().Sim
	if s == nil {
		t.Fatal("no sim settings")
	}
	if _, err := machine.Simulated(s.Machine); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{s.Quick, s.Full, s.Smoke} {
		if err := experiment.ParseOptions(NewOptions(), args...); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}

// A simulated text scanner reads each pass as a new task (a cat): its
// sleeps and their waits for the CPU are the sum over all of them.
func TestScannerStatsSumItsTasks(t *testing.T) {
	var ns kernel.Namespace
	task := func(sleeps ...time.Duration) *scannerTask {
		st := &scannerTask{Task: kernel.NewTask(&ns, "cat")}
		for _, d := range sleeps {
			st.runWaitMax = d / 2
			st.RecordBlocked("mmap_lock", d)
		}
		return st
	}
	s := []scanner{{past: []*scannerTask{task(3 * time.Millisecond), task()}, task: task(time.Millisecond, 2*time.Millisecond)}, {}}
	st, err := runStats(&Acc{}, nil, nil, []int{3, 0}, s, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.ScannersSlept["mmap_lock"], (HeldStat{Count: 3, MaxUS: 3000}); got != want {
		t.Errorf("slept %+v, want %+v", got, want)
	}
	if got, want := st.ScannersRunWait["mmap_lock"], (HeldStat{Count: 3, MaxUS: 1500}); got != want {
		t.Errorf("waits for the CPU %+v, want %+v", got, want)
	}
	if st.ScanPasses != 3 {
		t.Errorf("%d passes, want 3", st.ScanPasses)
	}
}

// On a machine whose noise is one long interruption now and then, the
// slowest call of a run without scanners is the one it hit: its time lost
// to the noise is a whole number of interruptions, and no more than the
// call took. Without noise it loses none.
func TestSimSlowestCallNoise(t *testing.T) {
	const blip = 500 * time.Microsecond
	d := machine.MustNamed("virtme-ng-4")
	spec := RunSpec{Scanners: "none", Duration: 100 * time.Millisecond, Seed: 1}
	quiet, err := RunSim(context.Background(), d, experiment.SimRun{Seed: 1, Until: time.Hour}, procfs.After, spec)
	if err != nil {
		t.Fatal(err)
	}
	if quiet.MaxOpNoiseUS != 0 {
		t.Errorf("without noise the slowest call (%.1f us) lost %.1f us to it", quiet.OpMaxUS, quiet.MaxOpNoiseUS)
	}
	d.Noise = machine.Noise{PerSecond: 200, NS: []float64{float64(blip)}, Source: "a test's"}
	st, err := RunSim(context.Background(), d, experiment.SimRun{Seed: 1, Until: time.Hour}, procfs.After, spec)
	if err != nil {
		t.Fatal(err)
	}
	n := st.MaxOpNoiseUS / us(blip)
	if n < 1 || n != float64(int(n)) || st.MaxOpNoiseUS > st.OpMaxUS || st.OpMaxUS-st.MaxOpNoiseUS > quiet.OpMaxUS {
		t.Errorf("the slowest call took %.1f us, %.1f us of it interrupted, against %.1f us without noise: want a whole number of %v interruptions, the rest no longer than without",
			st.OpMaxUS, st.MaxOpNoiseUS, quiet.OpMaxUS, blip)
	}
	if a := Attribution(Summarize(experiment.Row{Target: experiment.Sim, Variant: "after"}, "none", []Stats{st})); !strings.Contains(a, "us of it interrupted (the machine's noise)") {
		t.Errorf("attribution %q does not name the noise", a)
	}
}
