package schedwait

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"mmlab/experiment"
	"mmlab/machine"
	"mmlab/sched"
)

func host(release, preempt string, hz, cpus int) machine.Description {
	return machine.Description{Name: "host", Kernel: machine.Kernel{Release: release, Preempt: preempt, HZ: hz, CPUs: cpus}}
}

// The sim follows the description: HZ, preemption model, CPU count and
// the base slice of the release.
func TestSimConfigOf(t *testing.T) {
	cfg, n, err := SimConfigOf(host("6.18.44", "none", 250, 2), time.Second)
	if err != nil || n != 2 || cfg.HZ != 250 || cfg.Preempt != sched.PreemptNone || cfg.NormalizedSlice != 700_000 || cfg.Until != time.Second {
		t.Errorf("6.18, none, HZ 250, 2 CPUs: %+v, %d CPUs, %v", cfg, n, err)
	}
	cfg, n, err = SimConfigOf(host("6.12.5", "lazy", 0, 0), time.Second)
	if err != nil || n != 1 || cfg.HZ != 250 || cfg.Preempt != sched.PreemptLazy || cfg.NormalizedSlice != 750_000 {
		t.Errorf("6.12, lazy, HZ and CPUs unknown: %+v, %d CPUs, %v", cfg, n, err)
	}
	if _, _, err := SimConfigOf(host("6.18", "rt", 250, 2), time.Second); err == nil {
		t.Error("preemption model rt accepted")
	}
}

// The sim runner gives one result of the model target with its machine,
// the same twice for one seed, and another seed other sleeps.
func TestRunSim(t *testing.T) {
	run := func(seed uint64) Result {
		o := Def.NewOptions()
		o.Duration, o.Seed = experiment.Duration(200*time.Millisecond), seed
		var rs []Result
		env := experiment.Env{Machine: host("6.18.44", "none", 250, 2), Progress: func(string, ...any) {}}
		if err := RunSim(context.Background(), o, env, func(r Result) { rs = append(rs, r) }); err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || rs[0].Target != experiment.Model || rs[0].Variant != VariantSim || rs[0].Sim == nil || rs[0].Live != nil {
			t.Fatalf("results %+v", rs)
		}
		return rs[0]
	}
	a, b, c := run(1), run(1), run(2)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Errorf("seed 1 twice:\n%s\n%s", ja, jb)
	}
	if a.Wakeups == 0 || a.P50US > a.P90US || a.P90US > a.P99US || a.P99US > a.MaxUS || a.PreemptShare > a.ZeroShare {
		t.Errorf("seed 1: %+v", a)
	}
	if s := a.Sim; s.CPUs != 2 || s.BaseSliceUS != 1400 || s.HZ != 250 || s.Preempt != "none" {
		t.Errorf("sim figures %+v", s)
	}
	if c.P50US == a.P50US && c.Wakeups == a.Wakeups {
		t.Errorf("seeds 1 and 2 alike: %+v", c)
	}
}

func TestSleeps(t *testing.T) {
	a, b := Sleeps(7), Sleeps(7)
	for range 1000 {
		x := a()
		if x != b() || x < SleepMin || x >= SleepMin+SleepRange {
			t.Fatalf("sleep %v", x)
		}
	}
}

func TestSummarize(t *testing.T) {
	us := time.Microsecond
	var ws []Wake
	for i := range 100 {
		ws = append(ws, Wake{Wait: time.Duration(i) * us, AtOnce: i < 10, Preempt: i < 5})
	}
	r := Summarize(experiment.LiveRow, ws)
	if r.Wakeups != 100 || r.ZeroShare != .1 || r.PreemptShare != .05 || r.P50US != 49 || r.P90US != 89 || r.P99US != 98 || r.MaxUS != 99 || r.MeanUS != 49.5 {
		t.Errorf("%+v", r)
	}
	if e := Summarize(experiment.LiveRow, nil); e.Wakeups != 0 || e.P50US != 0 {
		t.Errorf("empty: %+v", e)
	}
	if _, err := json.Marshal(Summarize(experiment.LiveRow, nil)); err != nil {
		t.Error(err)
	}
}

// The table has a row per target and the ratio; the verdict says within
// or outside, and fails only a side without wake-ups.
func TestTableAndVerdict(t *testing.T) {
	sim := Result{Row: experiment.Row{Target: experiment.Model, Variant: VariantSim}, Wakeups: 10, P50US: 600, Sim: &Sim{Machine: "host", HZ: 250}}
	live := Result{Row: experiment.LiveRow, CPU: 1, Wakeups: 10, P50US: 300, Live: &Live{Clean: 5, CleanP50US: 250}}
	var b strings.Builder
	Table(&b, Def.NewOptions(), []Result{sim, live})
	out := b.String()
	for _, want := range []string{"\nsim ", "\nlive ", "median ratio sim/live 2.00", "250"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if line, failed := Verdict(nil, []Result{sim, live}); failed || !strings.Contains(line, "outside 1.5x median_ratio=2.00") {
		t.Errorf("verdict %q, failed %v", line, failed)
	}
	live.P50US = 500
	if line, failed := Verdict(nil, []Result{sim, live}); failed || !strings.Contains(line, "within") {
		t.Errorf("verdict %q, failed %v", line, failed)
	}
	// A trace that lacked the switches of some wake-ups' runs.
	gappy := live
	gappy.Live = &Live{MissedSwitches: 7, LeftOut: 5}
	if line, failed := Verdict(nil, []Result{sim, gappy}); failed || !strings.Contains(line, "unreliable") || !strings.Contains(line, "5 of 15 wake-ups") {
		t.Errorf("verdict %q, failed %v", line, failed)
	}
	b.Reset()
	Table(&b, Def.NewOptions(), []Result{sim, gappy})
	if !strings.Contains(b.String(), "CPU 1 that its other events show (the kernel did not trace them): 7, and 5 wake-ups") {
		t.Errorf("table does not say what the trace lacks:\n%s", b.String())
	}
	live.Wakeups = 0
	if _, failed := Verdict(nil, []Result{sim, live}); !failed {
		t.Error("no live wake-ups: not failed")
	}
}

// Bad flags are usage errors, before anything runs.
func TestOptionsRejected(t *testing.T) {
	def := Def
	ran := false
	def.Model = func(context.Context, *Options, experiment.Env, func(Result)) error { ran = true; return nil }
	for _, args := range [][]string{{"--duration", "1ms"}, {"--duration", "1h"}, {"--cpu", "-2"}, {"--seed", "x"}} {
		var stderr strings.Builder
		code := experiment.Bind(def, nil).Main(context.Background(), append([]string{"--target", "model"}, args...), io.Discard, &stderr)
		if code != experiment.ExitUsage || !strings.Contains(stderr.String(), strings.TrimLeft(args[0], "-")) {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr.String())
		}
	}
	if ran {
		t.Error("ran despite a bad flag")
	}
	for _, s := range [][]string{Def.Settings().Quick, Def.Settings().Full, Def.Settings().Smoke} {
		if err := experiment.ParseOptions(Def.NewOptions(), slices.Clone(s)...); err != nil {
			t.Errorf("setting %v: %v", s, err)
		}
	}
}
