package trigger

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"mmlab/binfmt"
	"mmlab/cpu"
	"mmlab/experiment"
	"mmlab/host"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/uprobes"
)

// options parses args as `mmlab run trigger` does.
func options(t *testing.T, args ...string) *Options {
	t.Helper()
	o := NewOptions()
	if err := experiment.ParseOptions(o, args...); err != nil {
		t.Fatal(err)
	}
	return o
}

// Every case runs on every variant and 2 CPUs, and every call is a hit.
func TestMeasure(t *testing.T) {
	for _, c := range AllCases {
		res, err := measure(context.Background(), modelConfig{Case: c, CPUs: 2, Variants: uprobes.Variants,
			Warmup: 5 * time.Millisecond, Interval: 10 * time.Millisecond, Samples: 2})
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if len(res) != len(uprobes.Variants) {
			t.Fatalf("%s: results %+v", c.Name, res)
		}
		for i, r := range res {
			if r.Variant != uprobes.Variants[i].Name || len(r.Samples) != 2 || r.Calls == 0 ||
				(c.Probed && r.Hits != r.Calls) || (!c.Probed && r.Hits != 0) {
				t.Errorf("%s %s: %d samples, %d calls, %d hits", c.Name, r.Variant, len(r.Samples), r.Calls, r.Hits)
			}
		}
	}
}

// A cancelled run stops and says so.
func TestMeasureStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c, _ := LookupCase("uprobe-nop")
	_, err := measure(ctx, modelConfig{Machine: machine.MustNamed("x86-64"), Case: c, CPUs: 1, Variants: uprobes.Variants, Interval: time.Hour, Samples: 1})
	if err != context.Canceled {
		t.Errorf("measure on a cancelled context: %v", err)
	}
}

// runModel runs o on the model of x86-64 with variants and returns the
// results in the order RunModel emits them.
func runModel(t *testing.T, o *Options, variants ...string) []Result {
	t.Helper()
	var rs []Result
	env := experiment.Env{Machine: machine.MustNamed("x86-64"), Variants: variants, Progress: func(string, ...any) {}}
	if err := RunModel(context.Background(), o, env, func(r Result) { rs = append(rs, r) }); err != nil {
		t.Fatal(err)
	}
	return rs
}

// The model runner emits one result per (variant, case, cpus), grouped by
// variant, with the key fields and the paired ratio on the rows of the
// variants after srcu.
func TestRunModel(t *testing.T) {
	o := options(t, "--cpus", "1", "--cases", "nop,uprobe-nop", "--warmup", "1ms", "--duration", "4ms", "--interval", "2ms")
	rs := runModel(t, o, Def.Variants...)
	if len(rs) != 6 {
		t.Fatalf("%d results, want 6", len(rs))
	}
	for i, r := range rs {
		want := []string{"srcu", "srcu", "tasks-trace", "tasks-trace", "v6.14+", "v6.14+"}[i]
		if r.Target != experiment.Model || r.Variant != want || r.Attach != "model" || r.CPUs != 1 || len(r.MopsRuns) != 2 {
			t.Errorf("result %d: %+v", i, r)
		}
		if r.Mops <= 0 {
			t.Errorf("result %d: mops %v", i, r.Mops)
		}
		if (r.VsSRCU != nil) != (want != "srcu") {
			t.Errorf("result %d: ratio_vs_srcu present %v", i, r.VsSRCU != nil)
		}
	}
	var b strings.Builder
	Table(&b, o, rs)
	for _, want := range []string{"model srcu:\n", "model tasks-trace:\n", "model v6.14+:\n", "uprobe-nop ( 1 cpus): ", "tasks-trace/srcu ratio: wall "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// runOptimize runs uprobe-nop5 on srcu and v6.14+ with --optimize opt
// and checks the kernels' variants and optimizations, in order.
func runOptimize(t *testing.T, opt string, want [][2]string) (*Options, []Result) {
	t.Helper()
	o := options(t, "--cpus", "1", "--cases", "uprobe-nop5", "--optimize", opt, "--warmup", "1ms", "--duration", "4ms", "--interval", "2ms")
	rs := runModel(t, o, "srcu", "v6.14+")
	if len(rs) != len(want) {
		t.Fatalf("--optimize %s: %d results, want %d", opt, len(rs), len(want))
	}
	for i, r := range rs {
		if r.Variant != want[i][0] || r.Optimize != want[i][1] || r.Hits != r.Calls {
			t.Errorf("--optimize %s: result %d: %+v, want %v", opt, i, r, want[i])
		}
	}
	return o, rs
}

// By default each variant keeps its kernel's optimization: none in the
// seed's era, a call in v6.14+; naming it again adds no kernel.
func TestRunModelOptimizeKernel(t *testing.T) {
	runOptimize(t, "kernel", [][2]string{{"srcu", "off"}, {"v6.14+", "call"}})
	runOptimize(t, "kernel,off", [][2]string{{"srcu", "off"}, {"v6.14+", "call"}, {"v6.14+", "off"}})
}

// --optimize gives every variant a kernel per optimization, sampled in
// turn: one result each, the srcu ratio within the same optimization, and
// the table names the optimization.
func TestRunModelOptimize(t *testing.T) {
	o, rs := runOptimize(t, "call,off", [][2]string{{"srcu", "call"}, {"v6.14+", "call"}, {"srcu", "off"}, {"v6.14+", "off"}})
	for i, r := range rs {
		if (r.VsSRCU != nil) != (r.Variant != "srcu") {
			t.Errorf("result %d: VsSRCU %v", i, r.VsSRCU)
		}
	}
	var b strings.Builder
	Table(&b, o, rs)
	for _, want := range []string{"model srcu (nop5 optimization call):\n", "model v6.14+ (nop5 optimization off):\n", "v6.14+ (nop5 optimization off)/srcu ratio"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// The optimization switch is the kernel's: with call, the producers' hits
// on the nop5 turned it into a call to a trampoline of their mm; with off,
// it stays an int3 and no trampoline is mapped.
func TestOptimizeSwitch(t *testing.T) {
	c, _ := LookupCase("uprobe-nop5")
	for _, opt := range []uprobes.Optimize{uprobes.OptimizeCall, uprobes.OptimizeOff} {
		v := uprobes.Variants[len(uprobes.Variants)-1]
		v.Config.Optimize = opt
		k, err := newTriggerKernel(modelConfig{Machine: machine.MustNamed("x86-64"), Case: c, CPUs: 1}, v)
		if err != nil {
			t.Fatal(err)
		}
		var s cpu.Stop
		r := k.Machine.Start(k.tasks[0], 0, 0, func(r *kernel.Runner) { s = binfmt.Loop(r, 0, k.entry, 100) })
		<-r.Done()
		k.Stop()
		if s.Reason != cpu.StopHalt || k.totalHits() != 100 {
			t.Fatalf("%v: %v, %d hits for 100 calls", opt, s, k.totalHits())
		}
		tramps := k.Uprobes.Trampolines(k.tasks[0].MM)
		if (len(tramps) == 1) != (opt == uprobes.OptimizeCall) || len(tramps) > 1 {
			t.Errorf("%v: trampolines %#x", opt, tramps)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the error
	}{
		{[]string{"--cpus", "999"}, `--cpus 999: "999": want a comma-separated list of counts from 1 to 128`},
		{[]string{"--cpus", "1,0"}, `"0"`},
		{[]string{"--cpus", ""}, `--cpus`},
		{[]string{"--cases", "uprobe-foo"}, `--cases: unknown "uprobe-foo"`},
		{[]string{"--attach", "kprobe"}, `--attach: unknown "kprobe"`},
		{[]string{"--optimize", "on"}, `--optimize: unknown "on"`},
		{[]string{"--warmup", "-1s"}, `--warmup -1s`},
		{[]string{"--interval", "0s"}, `--interval 0s`},
		{[]string{"--duration", "1s", "--interval", "2s"}, `--duration 1s`},
	} {
		if err := experiment.ParseOptions(NewOptions(), tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	o := options(t, "--attach", "multi", "--cpus", "4,1")
	if len(o.Attach) != 1 || o.Attach[0] != "uprobe_multi" || len(o.CPUs) != 2 || o.CPUs[0] != 4 {
		t.Errorf("parsed %+v", o)
	}
}

func TestFormatLine(t *testing.T) {
	// Seed 004's lines, from their own mean and stddev.
	for _, tc := range []struct {
		name     string
		cpus     int
		mean, sd float64
		want     string
	}{
		{"uprobe-nop", 1, 3.396, 0.002, "uprobe-nop ( 1 cpus): 3.396 ± 0.002M/s ( 3.396M/s/cpu)"},
		{"uprobe-nop", 16, 7.615, 0.099, "uprobe-nop (16 cpus): 7.615 ± 0.099M/s ( 0.476M/s/cpu)"},
		{"uretprobe-nop", 8, 5.883, 0.002, "uretprobe-nop ( 8 cpus): 5.883 ± 0.002M/s ( 0.735M/s/cpu)"},
	} {
		if got := FormatLine(tc.name, tc.cpus, tc.mean, tc.sd); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}

// BenchmarkHit runs each trigger case on one model CPU, b.N calls in one
// Run of the producer loop: ns per call, hit path included (the no-probe
// case is the loop's own cost).
func BenchmarkHit(b *testing.B) {
	for _, c := range AllCases[:4] {
		for _, v := range uprobes.Variants {
			b.Run(c.Name+"/"+v.Name, func(b *testing.B) {
				k, err := newTriggerKernel(modelConfig{Machine: machine.MustNamed("x86-64"), Case: c, CPUs: 1}, v)
				if err != nil {
					b.Fatal(err)
				}
				defer k.Stop()
				var s cpu.Stop
				var cpuTime time.Duration
				b.ResetTimer()
				r := k.Machine.Start(k.tasks[0], 0, 0, func(r *kernel.Runner) {
					t0, _ := host.ThreadCPUTime()
					s = binfmt.Loop(r, 0, k.entry, uint64(b.N))
					t1, _ := host.ThreadCPUTime()
					cpuTime = t1 - t0
				})
				<-r.Done()
				b.StopTimer()
				if s.Reason != cpu.StopHalt || (c.Probed && k.totalHits() != uint64(b.N)) {
					b.Fatalf("%v, %d hits for %d calls", s, k.totalHits(), b.N)
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mcalls/s")
				if cpuTime > 0 {
					b.ReportMetric(float64(b.N)/cpuTime.Seconds()/1e6, "Mcalls/cpu-s")
				}
			})
		}
	}
}

// On a simulated machine the same machine and seed give the same table,
// byte for byte, and v6.14+'s optimized nop5 beats an int3 as it does on
// x86-64 kernels since 6.18.
func TestSimDeterministic(t *testing.T) {
	e := experiment.Bind(Def, nil)
	args := []string{"--target", "sim", "--machine", "x86-64", "--cpus", "1,2", "--cases", "uprobe-nop,uretprobe-nop,uprobe-nop5",
		"--variant", "srcu,v6.14+", "--warmup", "1ms", "--duration", "4ms", "--interval", "2ms", "--json"}
	var outs []string
	var docs []struct {
		Results []Result `json:"results"`
	}
	for range 2 {
		var out, errb strings.Builder
		if code := e.Main(context.Background(), args, &out, &errb); code != experiment.ExitOK {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		var doc struct {
			Results []Result `json:"results"`
		}
		if err := json.Unmarshal([]byte(out.String()), &doc); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, doc)
		var tab strings.Builder
		Table(&tab, options(t, "--cpus", "1,2", "--cases", "uprobe-nop,uretprobe-nop,uprobe-nop5"), doc.Results)
		outs = append(outs, tab.String())
	}
	if outs[0] != outs[1] {
		t.Errorf("two runs differ:\n%s\n%s", outs[0], outs[1])
	}
	rate := map[string]float64{}
	for _, r := range docs[0].Results {
		if r.Target != experiment.Sim {
			t.Errorf("result on target %s", r.Target)
		}
		if r.CPUs == 1 {
			rate[r.Variant+" "+r.Case] = r.Mops
		}
	}
	if !(rate["v6.14+ uprobe-nop5"] > rate["v6.14+ uprobe-nop"]) || rate["srcu uprobe-nop5"] != rate["srcu uprobe-nop"] {
		t.Errorf("1-CPU rates %v: want v6.14+'s optimized nop5 faster than its int3, srcu's nop5 an int3", rate)
	}
}

// The seed of a sim run only breaks ties between CPUs whose clocks are
// equal, as at a sample's start, where every producer starts at the same
// instant: it picks the order in which the producers first reach
// mmap_lock's lines, and nothing in the model reorders that convoy until
// the sample ends. On one socket every order costs the same (each
// transfer is of one class), so on seed 004's machine 16 producers give
// the same samples under any seed; 32 span both sockets, and a sample's
// rate is its order's, set by how often the line crosses the sockets on
// its way round: the seed moves it (simSettings says what that costs a
// point's mean).
func TestSimSeedOrdersConvoy(t *testing.T) {
	e := experiment.Bind(Def, nil)
	samples := func(cpus string, seed int) []float64 {
		args := []string{"--target", "sim", "--machine", SeedMachine, "--cpus", cpus, "--cases", "uprobe-nop",
			"--variant", "srcu", "--warmup", "0s", "--duration", "2ms", "--interval", "1ms", "--sim-seed", strconv.Itoa(seed), "--json"}
		var out, errb strings.Builder
		if code := e.Main(context.Background(), args, &out, &errb); code != experiment.ExitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		var doc struct {
			Results []Result `json:"results"`
		}
		if err := json.Unmarshal([]byte(out.String()), &doc); err != nil {
			t.Fatal(err)
		}
		if len(doc.Results) != 1 {
			t.Fatalf("%v: %d results, want 1", args, len(doc.Results))
		}
		return doc.Results[0].MopsRuns
	}
	if a, b := samples("16", 1), samples("16", 2); !slices.Equal(a, b) {
		t.Errorf("16 producers on one socket: seed 1 samples %v, seed 2 %v: want the same", a, b)
	}
	if a, b := samples("32", 1), samples("32", 2); slices.Equal(a, b) {
		t.Errorf("32 producers on two sockets: seeds 1 and 2 both sample %v: want the convoy's order, and so its rate, to follow the seed", a)
	}
}
