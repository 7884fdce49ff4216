package mapscan

import (
	"context"
	"encoding/json"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"mmlab/experiment"
	"mmlab/host"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/procfs"
	"mmlab/sched"
)

// hostCanFIFO reports whether this process may make a thread SCHED_FIFO
// (sched.Config.HostPriority's need), trying it on a thread of its own.
func hostCanFIFO() bool {
	ok := make(chan bool)
	go func() {
		runtime.LockOSThread() // the thread ends with the goroutine, its policy with it
		ok <- host.SetFIFO(1) == nil
	}()
	return <-ok
}

func TestRunModelSmoke(t *testing.T) {
	canFIFO := hostCanFIFO()
	for _, v := range []procfs.Variant{procfs.Before, procfs.After} {
		for _, c := range Cases {
			st, err := RunModel(context.Background(), machine.MustNamed("x86-64"), v, RunSpec{Scanners: c, Duration: 300 * time.Millisecond, Seed: 1, BusyDuration: BusySpin})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s %s: %+v", v, c, st)
			if st.Ops == 0 || (c == "none") != (st.ScanPasses == 0) {
				t.Errorf("%s %s: %d ops, %d scan passes", v, c, st.Ops, st.ScanPasses)
			}
			if canFIFO && st.NoHostPriority {
				t.Errorf("%s %s: the model's threads ran without host priorities, which this process may set", v, c)
			}
		}
	}
}

// BenchmarkModelTextScanners runs the model with two text scanners, one
// 1-second run per iteration, for each walk, and reports the mapper's mean
// and maximum call latency and its maximum lock wait per call (the seed's
// comparison: after should be about 10x lower in the maxima).
func BenchmarkModelTextScanners(b *testing.B) {
	for _, v := range []procfs.Variant{procfs.Before, procfs.After} {
		b.Run(v.String(), func(b *testing.B) {
			var meanSum, opMax, waitMax float64
			n := 0
			for b.Loop() {
				st, err := RunModel(context.Background(), machine.MustNamed("x86-64"), v, RunSpec{Scanners: "text", Duration: time.Second, Seed: uint64(n + 1), BusyDuration: BusySpin, Preempt: procfs.PreemptFull})
				if err != nil {
					b.Fatal(err)
				}
				meanSum += st.OpMeanUS
				opMax = max(opMax, st.OpMaxUS)
				waitMax = max(waitMax, st.LockWaitMaxUS)
				n++
			}
			b.ReportMetric(meanSum/float64(n), "op_mean_us")
			b.ReportMetric(opMax, "op_max_us")
			b.ReportMetric(waitMax, "lock_wait_max_us")
		})
	}
}

func TestOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		bad  string
	}{
		{nil, ""},
		{[]string{"--runs", "1", "--duration", "1ms"}, ""},
		{[]string{"--runs", "0"}, "--runs 0"},
		{[]string{"--runs", "-3"}, "--runs -3"},
		{[]string{"--duration", "0"}, "--duration 0s"},
		{[]string{"--duration", "-1s"}, "--duration -1s"},
		{[]string{"--nsamples", "5", "--busyduration", "0", "--preempt", "full", "--rawdata"}, ""},
		{[]string{"--busyduration", "-1ms"}, "--busyduration -1ms"},
		{[]string{"--preempt", "voluntary"}, "--preempt"},
		{[]string{"--cases", "text,query"}, ""},
		{[]string{"--cases", "text,fast"}, `"fast"`},
	} {
		err := experiment.ParseOptions(NewOptions(), c.args...)
		if c.bad == "" && err != nil || c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad)) {
			t.Errorf("%q: %v, want an error naming %q", c.args, err, c.bad)
		}
	}
	o := NewOptions()
	if err := experiment.ParseOptions(o, "--nsamples", "7"); err != nil || o.Runs != 7 {
		t.Errorf("--nsamples 7: runs %d, %v", o.Runs, err)
	}
	b, err := json.Marshal(NewOptions())
	if want := `{"cases":["none","text","query"],"runs":3,"preempt":"none","duration_ms":2000,"busy_duration_ms":2,"region_bytes":134217728,"scanner_count":2,"scanner_nice":15}`; err != nil || string(b) != want {
		t.Errorf("params %s, %v; want %s", b, err, want)
	}
}

// The seed's summary: the median of the means, the maximum of the maxima;
// lock waits on the model, and on the live target when every run read the
// lock tracepoints; a run that timed no call is insufficient.
func TestSummarize(t *testing.T) {
	runs := []Stats{
		{Ops: 10, OpMeanUS: 5, OpMaxUS: 50, LockWaitMaxUS: 7, ScanPasses: 1},
		{Ops: 20, OpMeanUS: 1, OpMaxUS: 90, LockWaitMaxUS: 3, ScanPasses: 2},
		{Ops: 30, OpMeanUS: 3, OpMaxUS: 20, LockWaitMaxUS: 9, ScanPasses: 3},
	}
	model := Summarize(experiment.Row{Target: experiment.Model, Variant: "before"}, "text", runs)
	if model.OpMeanUS != 3 || model.OpMaxUS != 90 || model.OpMaxMedianUS != 50 || *model.LockWaitMaxUS != 9 || model.Ops != 60 || model.ScanPasses != 6 ||
		model.Runs != 3 || !slices.Equal(model.OpMaxUSRuns, []float64{50, 90, 20}) || model.Insufficient() {
		t.Errorf("model summary: %+v", model)
	}
	live := Summarize(experiment.LiveRow, "text", runs)
	if live.LockWaitMaxUS == nil || *live.LockWaitMaxUS != 9 || live.LockTraceNote != "" {
		t.Errorf("traced live summary: %+v", live)
	}
	runs[2].LockTraceNote = "no lock tracepoints: needs root"
	live = Summarize(experiment.LiveRow, "text", runs)
	b, _ := json.Marshal(live)
	if strings.Contains(string(b), "lock_wait") || live.LockWaitMaxUS != nil || live.LockTraceNote != runs[2].LockTraceNote {
		t.Errorf("live summary with an untraced run has lock waits: %s", b)
	}
	runs[1] = Stats{}
	empty := Summarize(experiment.LiveRow, "query", runs)
	if !empty.Insufficient() {
		t.Errorf("a run without calls is not insufficient: %+v", empty)
	}
	if line, failed := Verdict(nil, []Result{model, empty}); !failed || !strings.Contains(line, "insufficient") || !strings.Contains(line, "live kernel query") {
		t.Errorf("verdict %q, %v", line, failed)
	}
	if line, failed := Verdict(nil, []Result{model}); failed || line != "" {
		t.Errorf("verdict %q, %v on sufficient runs", line, failed)
	}
}

// The model runner emits one summary per variant and case, each over
// o.Runs runs, and the table ends with the seed's comparison.
func TestModel(t *testing.T) {
	o := NewOptions()
	o.Runs, o.Duration = 2, experiment.Duration(50*time.Millisecond)
	var rs []Result
	if err := Model(context.Background(), o, experiment.Env{Machine: machine.MustNamed("x86-64"), Variants: procfs.Variants.Names()}, func(r Result) { rs = append(rs, r) }); err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(procfs.Variants.Names())*len(Cases) {
		t.Fatalf("%d results", len(rs))
	}
	for _, r := range rs {
		if r.Runs != 2 || len(r.OpMeanUSRuns) != 2 || r.LockWaitMeanUS == nil || r.Target != experiment.Model {
			t.Errorf("%+v", r)
		}
	}
	if n := len(Ratios(rs)); n == 0 {
		t.Error("no before/after lines")
	}
}

// --rawdata is run-proc-vs-map.sh's: per run, in ms, the median of the
// means, then the means and the maxima each sorted on its own.
func TestRawData(t *testing.T) {
	r := Summarize(experiment.LiveRow, "text", []Stats{
		{Ops: 1, OpMeanUS: 12, OpMaxUS: 500}, {Ops: 1, OpMeanUS: 8, OpMaxUS: 3000}, {Ops: 1, OpMeanUS: 10, OpMaxUS: 40},
	})
	want := []string{"0.010 0.008 0.040", "0.010 0.010 0.500", "0.010 0.012 3.000"}
	if got := RawData(r); !slices.Equal(got, want) {
		t.Errorf("raw data %q, want %q", got, want)
	}
	var b strings.Builder
	Table(&b, &Options{RawData: true}, []Result{r})
	if !strings.Contains(b.String(), "rawdata live kernel text") || !strings.Contains(b.String(), want[2]+"\n") {
		t.Errorf("the table with --rawdata lacks the raw data:\n%s", b.String())
	}
}

// A live run's host note is printed under the table once, however many
// cases carry it; the first run's that has one is the case's.
func TestTableHostNote(t *testing.T) {
	const note = "DAMON is on: kdamond 0 (pid 75): operations paddr"
	rs := []Result{
		Summarize(experiment.LiveRow, "none", []Stats{{Ops: 1}, {Ops: 1, HostNote: note}}),
		Summarize(experiment.LiveRow, "text", []Stats{{Ops: 1, HostNote: note}}),
	}
	if rs[0].HostNote != note {
		t.Errorf("the case's note %q, want the second run's", rs[0].HostNote)
	}
	var b strings.Builder
	Table(&b, nil, rs)
	if n := strings.Count(b.String(), "live: "+note+"\n"); n != 1 {
		t.Errorf("the note printed %d times:\n%s", n, b.String())
	}
}

// The wait accounting names the lock a preempted scanner held: the mmap
// lock in the Before walk, a VMA lock in the After walk, and nothing
// without preemption in kernel code; the slowest call's wait is traced to
// it.
func TestModelWaitAccounting(t *testing.T) {
	for _, c := range []struct {
		v       procfs.Variant
		p       procfs.Preemption
		allowed string
	}{{procfs.Before, procfs.PreemptFull, "mmap_lock"}, {procfs.After, procfs.PreemptFull, "vma_lock"}, {procfs.After, procfs.PreemptNone, ""}} {
		st, err := RunModel(context.Background(), machine.MustNamed("x86-64"), c.v, RunSpec{Scanners: "text", Duration: 300 * time.Millisecond, Seed: 1, BusyDuration: BusySpin, Preempt: c.p})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s %s: slowest call waited %v; scanners preempted holding %v", c.v, c.p, st.MaxOpWaitUS, st.Preempted)
		for lock := range st.Preempted {
			if lock != c.allowed {
				t.Errorf("%s, preempt %s: a scanner was preempted holding %s", c.v, c.p, lock)
			}
		}
		if c.allowed != "" && st.Preempted[c.allowed].Count == 0 {
			t.Errorf("%s, preempt %s: no scanner was preempted holding %s", c.v, c.p, c.allowed)
		}
		r := Summarize(experiment.Row{Target: experiment.Model, Variant: c.v.String()}, "text", []Stats{st})
		if line := Attribution(r); !strings.Contains(line, "slowest call") {
			t.Errorf("attribution %q", line)
		}
	}
}

// The model's placement: the mapper's CPU 0 alone on host CPU 0 when the
// host has two CPUs or more, the scanner CPUs spread over the others.
func TestHostPlacement(t *testing.T) {
	for _, c := range []struct {
		ncpu, nhost int
		want        []int
	}{{3, 1, []int{0, 0, 0}}, {3, 2, []int{0, 1, 1}}, {3, 4, []int{0, 1, 2}}, {5, 3, []int{0, 1, 2, 1, 2}}} {
		if got := hostPlacement(c.ncpu, c.nhost); !slices.Equal(got, c.want) {
			t.Errorf("hostPlacement(%d, %d) = %v, want %v", c.ncpu, c.nhost, got, c.want)
		}
	}
}

// A text scanner writes every chunk it reads to its output, as cat does:
// one pass writes the whole maps text.
func TestScanTextWritesEveryChunk(t *testing.T) {
	m := mm.New(new(mm.Namespace), machine.MustNamed("x86-64").Features)
	for i := range 200 { // 200 VMAs: several chunks
		addr := uint64(regionBase + 2*i*PageSize)
		if _, err := m.Mmap(nil, addr, PageSize, mm.PROT_READ, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []procfs.Variant{procfs.Before, procfs.After} {
		var out strings.Builder
		f, err := procfs.OpenMaps(m, procfs.Options{Variant: v})
		if err != nil {
			t.Fatal(err)
		}
		if err := scanText(f, &out); err != nil {
			t.Fatal(err)
		}
		if want := procfs.Maps(m); out.String() != want || len(want) <= procfs.ChunkSize {
			t.Errorf("%s: a pass wrote %d bytes, want the %d of the maps text", v, out.Len(), len(want))
		}
	}
}

// A live result's attribution line gives the tracepoints' figures, or the
// reason it has none.
func TestAttributionLive(t *testing.T) {
	traced := Summarize(experiment.LiveRow, "text", []Stats{{Ops: 5, OpMaxUS: 900, LockWaitMaxUS: 800,
		MaxOpWaitUS: map[string]float64{"mmap_lock": 800}, ScannersSlept: Held{"mmap_lock": {Count: 3, MaxUS: 810}}}})
	want := "live kernel text: slowest call 900.0 us, blocked 800.0 us on mmap_lock; scanners slept on mmap_lock 3 times (longest 810.0 us) (the kernel's lock:contention tracepoints: rw_semaphore sleeps only)"
	if got := Attribution(traced); got != want {
		t.Errorf("traced:\n%s\nwant\n%s", got, want)
	}
	woken := Summarize(experiment.LiveRow, "none", []Stats{{Ops: 5, OpMaxUS: 1300, MaxOpWaitUS: map[string]float64{"rw_semaphore in anon_vma_clone": 1283},
		SlowestWake: &Wake{By: "kdamond.0", RunWaitUS: 1256}}})
	want = "live kernel none: slowest call 1300.0 us, blocked 1283.0 us on rw_semaphore in anon_vma_clone (the longest sleep woken by kdamond.0, then 1256.0 us until the mapper ran) (the kernel's lock:contention tracepoints: rw_semaphore sleeps only)"
	if got := Attribution(woken); got != want {
		t.Errorf("woken:\n%s\nwant\n%s", got, want)
	}
	untraced := Summarize(experiment.LiveRow, "text", []Stats{{Ops: 5, OpMaxUS: 900, LockTraceNote: "no lock tracepoints: needs root"}})
	want = "live kernel text: slowest call 900.0 us; no lock tracepoints: needs root"
	if got := Attribution(untraced); got != want {
		t.Errorf("untraced:\n%s\nwant\n%s", got, want)
	}
	if got := Attribution(Summarize(experiment.LiveRow, "text", []Stats{{}})); got != "" {
		t.Errorf("a result without calls: %q", got)
	}
}

// A text scanner's pass cost (spend) keeps its CPU as user-space work, so
// a better thread that wakes on the CPU meanwhile runs before it ends.
func TestSpendIsPreemptible(t *testing.T) {
	sys := sched.New(sched.Config{CPUs: 1})
	spending := make(chan struct{})
	better := make(chan struct{})
	var ranFirst bool
	a := sys.Spawn(0, 15, func(th *sched.Thread) {
		close(spending)
		spend(th, time.Minute) // until Stop, if the better thread runs first
		select {
		case <-better:
			ranFirst = true
		default:
		}
	})
	<-spending
	sys.Spawn(0, 0, func(*sched.Thread) { close(better) })
	<-better
	sys.Stop()
	<-a.Done()
	if !ranFirst {
		t.Error("the better thread ran only after the pass cost was spent")
	}
}

// run-proc-vs-map.sh's placement on 4 or more CPUs (scanners on CPUs 2 and
// 3), all on CPU 1 on fewer.
func TestScannerCPUs(t *testing.T) {
	for ncpu, want := range map[int][]int{2: {1, 1}, 3: {1, 1}, 4: {2, 3}, 64: {2, 3}} {
		if got := ScannerCPUs(ncpu); !reflect.DeepEqual(got, want) {
			t.Errorf("%d CPUs: %v, want %v", ncpu, got, want)
		}
	}
}
