package attach

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"mmlab/experiment"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/uapi"
	"mmlab/uprobes"
)

// measure runs every (variant, mode, n) once per run, in turn, and leaves
// no uprobe behind.
func TestMeasure(t *testing.T) {
	runs, err := measure(context.Background(), modelConfig{Variants: uprobes.Variants,
		Modes: []string{uapi.AttachMulti, uapi.AttachPerf}, Ns: []int{1, 4}, Runs: 2, Procs: 3, CPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	nv := len(uprobes.Variants)
	if len(runs) != 2*2*2*nv {
		t.Fatalf("%d runs, want %d", len(runs), 2*2*2*nv)
	}
	for i, r := range runs {
		v := uprobes.Variants[i%nv]
		if r.Variant != v.Name || r.Attach <= 0 || r.Detach <= 0 || r.First <= 0 || r.Hit <= 0 || r.Optimized != (v.Config.Optimize != uprobes.OptimizeOff) {
			t.Errorf("run %d: %+v (optimization %v)", i, r, v.Config.Optimize)
		}
	}
}

// The first hit of the nop5 probe after its attach optimizes the site: it
// takes the hitter's mmap write lock, maps a trampoline (the first time
// only) and writes the call with three text-poke syncs; later hits take
// the optimized path and change nothing. The removal restores the nop5,
// and the next first hit optimizes again, into the same trampoline.
func TestFirstHitOptimizesOnce(t *testing.T) {
	k, err := attachKernel(modelConfig{Machine: machine.MustNamed("x86-64"), Procs: 1, CPUs: 1}, uprobes.Variants[len(uprobes.Variants)-1])
	if k != nil {
		defer k.stop()
	}
	if err != nil {
		t.Fatal(err)
	}
	m := k.hitter.MM
	site := func() []byte { b := k.site(); return b[:] }
	var hits atomic.Int64
	con := &uprobes.Consumer{Handler: func(*kernel.Runner) int { hits.Add(1); return 0 }}
	var tramps []uint64
	for round := range 2 {
		up, err := k.Probe(k.hitProg, "nop5", con)
		if err != nil {
			t.Fatal(err)
		}
		if got := site(); got[0] != 0xcc {
			t.Fatalf("round %d: site % x after register, want an int3", round, got)
		}
		// The checks run on the hitter's thread after each run of its
		// code: after the first hit, then after the later ones.
		seq, syncs := m.LockSeq().Raw(), k.Machine.TextPokeSyncs()
		var optimized []byte
		_, err = k.hit([]int{1, LaterHits}, func(i int) {
			if i == 0 {
				if !k.siteOptimized() || m.LockSeq().Raw() == seq || k.Machine.TextPokeSyncs()-syncs != 3 {
					t.Errorf("round %d: first hit: site % x, mmap lock seq %d -> %d, %d syncs; want a call, a write section, 3 syncs",
						round, site(), seq, m.LockSeq().Raw(), k.Machine.TextPokeSyncs()-syncs)
				}
				optimized = site()
				seq, syncs = m.LockSeq().Raw(), k.Machine.TextPokeSyncs()
				return
			}
			if got := site(); !bytes.Equal(got, optimized) || m.LockSeq().Raw() != seq || k.Machine.TextPokeSyncs() != syncs {
				t.Errorf("round %d: later hits: site % x -> % x, mmap lock seq %d -> %d, %d syncs; want nothing changed",
					round, optimized, got, seq, m.LockSeq().Raw(), k.Machine.TextPokeSyncs()-syncs)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			tramps = k.Uprobes.Trampolines(m)
		}
		if got := k.Uprobes.Trampolines(m); len(got) != 1 || !slices.Equal(got, tramps) {
			t.Errorf("round %d: trampolines %#x, want the first round's %#x", round, got, tramps)
		}
		if err := k.Uprobes.UnregisterNosync(nil, up, con); err != nil {
			t.Fatal(err)
		}
		k.Uprobes.UnregisterSync(nil)
		if got := site(); !bytes.Equal(got, []byte{0x0f, 0x1f, 0x44, 0x00, 0x00}) {
			t.Fatalf("round %d: site % x after unregister, want the nop5", round, got)
		}
	}
	if want := int64(2 * (1 + LaterHits)); hits.Load() != want {
		t.Errorf("%d hits, want %d", hits.Load(), want)
	}
}

// The model runner emits one result per (variant, attach, n), with every
// run's times.
func TestRunModel(t *testing.T) {
	o := NewOptions()
	if err := experiment.ParseOptions(o, "--n", "1,4", "--runs", "2", "--gap", "0"); err != nil {
		t.Fatal(err)
	}
	var rs []Result
	env := experiment.Env{Machine: machine.MustNamed("x86-64"), Variants: Def.Variants, Progress: func(string, ...any) {}}
	if err := RunModel(context.Background(), o, env, func(r Result) { rs = append(rs, r) }); err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2*2*len(uprobes.Variants) {
		t.Fatalf("%d results, want %d", len(rs), 2*2*len(uprobes.Variants))
	}
	for _, r := range rs {
		if r.Target != experiment.Model || len(r.AttachMsRuns) != 2 || r.DetachMs <= 0 {
			t.Errorf("%+v", r)
		}
		// The seed's era (v6.12) has no nop5 optimization.
		vs, _ := uprobes.ParseVariants([]string{r.Variant})
		optimizes := len(vs) == 1 && vs[0].Config.Optimize != uprobes.OptimizeOff
		if f := r.FirstHit; f == nil || len(f.FirstHitUsRuns) != 2 || len(f.HitUsRuns) != 2 || f.FirstHitUs <= 0 || f.HitUs <= 0 || f.Optimized != optimizes {
			t.Errorf("%s: first hit %+v, want optimized %v", r.Variant, f, optimizes)
		}
	}
	if o.ModelProcs != modelProcs || o.ModelCPUs != modelCPUs {
		t.Errorf("params %+v", o)
	}
	var b strings.Builder
	Table(&b, o, rs)
	if !strings.HasPrefix(b.String(), "attach/detach, model srcu (median of 2 runs [min-max]; a nop5 probe's first hit, which optimizes it where the kernel does, and a later one)\n") {
		t.Errorf("table:\n%s", b.String())
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--n", "65"}, `--n 65: "65": want a comma-separated list of counts from 1 to 64`},
		{[]string{"--n", "1,x"}, `"x"`},
		{[]string{"--attach", "x"}, `--attach: unknown "x"`},
		{[]string{"--runs", "0"}, `--runs 0`},
		{[]string{"--gap", "-1ms"}, `--gap -1ms`},
	} {
		if err := experiment.ParseOptions(NewOptions(), tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

// runSim runs the experiment with args on epyc-vm-32 (seed 000's machine,
// HZ=1000), simulated, with variants.
func runSim(t *testing.T, variants []string, args ...string) []Result {
	t.Helper()
	o := NewOptions()
	if err := experiment.ParseOptions(o, args...); err != nil {
		t.Fatal(err)
	}
	env := experiment.Env{Target: experiment.Sim, Machine: machine.MustNamed("epyc-vm-32"), Variants: variants,
		Sim: &experiment.SimRun{Seed: 1, Until: time.Minute}, Progress: func(string, ...any) {}}
	var rs []Result
	if err := RunModel(context.Background(), o, env, func(r Result) { rs = append(rs, r) }); err != nil {
		t.Fatal(err)
	}
	return rs
}

// On a simulated machine detach pays the flavour's grace periods in
// virtual time: one of RCU Tasks Trace costs more than one of SRCU, and
// perf, which waits for one per link, pays n of them where uprobe_multi
// pays one. No mapper runs (CPUs 0), so that the grace periods are the
// machine's sleeps and not the interpreter's work: a quick test.
func TestSimDetachPaysGracePeriods(t *testing.T) {
	variants, err := uprobes.ParseVariants([]string{uprobes.SRCU.String(), uprobes.TasksTrace.String()})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := measure(context.Background(), modelConfig{Machine: machine.MustNamed("epyc-vm-32"), Sim: &kernel.Sim{Seed: 1, Until: time.Minute},
		Variants: variants, Modes: []string{uapi.AttachMulti, uapi.AttachPerf}, Ns: []int{1, 2}, Runs: 1, Gap: 200 * time.Millisecond, Procs: 2})
	if err != nil {
		t.Fatal(err)
	}
	detach := map[string]time.Duration{}
	for _, r := range runs {
		detach[fmt.Sprint(r.Variant, r.Mode, r.N)] = r.Detach
		if r.Attach <= 0 || r.Detach <= 0 || r.First <= 0 || r.Hit <= 0 {
			t.Errorf("%+v", r)
		}
	}
	if len(detach) != 2*2*len(variants) {
		t.Fatalf("%d runs, want %d", len(detach), 2*2*len(variants))
	}
	if tt, srcu := detach["tasks-trace"+uapi.AttachMulti+"1"], detach["srcu"+uapi.AttachMulti+"1"]; tt <= srcu {
		t.Errorf("uprobe_multi detach: tasks-trace %v, srcu %v; want Tasks Trace's grace period the longer", tt, srcu)
	}
	for _, v := range variants {
		perf2, perf1, multi2 := detach[v.Name+uapi.AttachPerf+"2"], detach[v.Name+uapi.AttachPerf+"1"], detach[v.Name+uapi.AttachMulti+"2"]
		if perf2 <= multi2 || perf2 <= perf1 {
			t.Errorf("%s detach: perf n=2 %v, perf n=1 %v, uprobe_multi n=2 %v; want perf n=2 the longest (a grace period per link)", v.Name, perf2, perf1, multi2)
		}
	}
}

// The whole model runner on a simulated machine, its mapper running
// through the probed sled: the same seed gives the same results, to the
// JSON byte, each naming its machine; today's kernel optimizes the nop5
// site at its first hit, which costs more than a later hit on the
// optimized path, itself cheaper than the seed's era's int3 hit, which is
// not optimized.
func TestSimRunModel(t *testing.T) {
	variants := []string{uprobes.TasksTrace.String(), "v6.14+"}
	args := []string{"--n", "1", "--runs", "1", "--attach", "uprobe_multi"}
	a := runSim(t, variants, args...)
	b := runSim(t, variants, args...)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Errorf("two sim runs differ:\n%s\n%s", ja, jb)
	}
	if len(a) != len(variants) {
		t.Fatalf("%d results, want %d", len(a), len(variants))
	}
	for _, r := range a {
		if r.Target != experiment.Sim || r.Machine != "epyc-vm-32" || r.AttachMs <= 0 || r.DetachMs <= 0 {
			t.Errorf("%+v", r)
		}
	}
	old, today := a[0].FirstHit, a[1].FirstHit
	if old.Optimized || !today.Optimized || today.FirstHitUs <= today.HitUs || today.HitUs >= old.HitUs {
		t.Errorf("tasks-trace %+v, v6.14+ %+v: want only v6.14+ optimized, its first hit dearer than a later one, which is cheaper than an int3 hit", old, today)
	}
}
