package mapslock

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"mmlab/experiment"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/procfs"
	"mmlab/uapi"
)

func TestClassify(t *testing.T) {
	const ms = time.Millisecond
	for _, c := range []struct {
		name    string
		queries []Span
		want    Run
	}{
		// Under mmap_lock: one query sleeps from the start to the unlock.
		{"waits", []Span{{0, 100 * ms / 1000}, {ms / 10, 10 * ms}}, Run{HoldMs: 10, Probed: true, QueryMs: 9.9}},
		// Under per-VMA locks: short queries all through the hold.
		{"returns", []Span{{ms / 2, ms/2 + 1000}, {2 * ms, 2*ms + 1000}, {5 * ms, 5*ms + 3000}}, Run{HoldMs: 10, Probed: true, First: true, QueryMs: 0.001}},
		// A query that returns in the last tenth may have waited.
		{"late", []Span{{2 * ms, 9500 * time.Microsecond}}, Run{HoldMs: 10, Probed: true, QueryMs: 7.5}},
		// The prober never ran during the middle of the hold.
		{"unprobed", []Span{{0, ms / 20}, {9950 * time.Microsecond, 10 * ms}}, Run{HoldMs: 10}},
	} {
		if got := Classify(10*ms, c.queries); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestJudge(t *testing.T) {
	res := func(first float64, probed, runs int) Result {
		return Result{First: first, Probed: probed, HoldMsRuns: make([]float64, runs)}
	}
	for _, c := range []struct {
		other, same Result
		want        string
	}{
		{res(1, 9, 9), res(0, 9, 9), VerdictPerVMA},
		{res(0, 9, 9), res(0, 9, 9), VerdictMmapLock},
		{res(1, 9, 9), res(0.6, 9, 9), VerdictPerVMA},
		{res(1, 9, 9), res(0.8, 9, 9), VerdictUnclear}, // the control returned as often: the probe missed the hold
		{res(0.5, 9, 9), res(0, 9, 9), VerdictUnclear},
		{res(1, 3, 9), res(0, 9, 9), VerdictUnclear}, // too few probed runs
	} {
		if got := Judge(c.other, c.same); got != c.want {
			t.Errorf("Judge(%+v, %+v) = %s, want %s", c.other, c.same, got, c.want)
		}
	}
}

// waitQueued waits until n tasks sleep on m's mmap lock.
func waitQueued(m *mm.MM, n int) {
	for m.MmapLock.Waiters() < n {
		runtime.Gosched()
	}
}

// TestQueryUnderWriteLock drives the probe's interleaving by hand: the mmap
// lock write-held with the region's VMA write-locked, as mprotect holds
// them. Before, a query of another VMA sleeps on mmap_lock until the
// unlock; after, it returns at once, and a query of the locked VMA sleeps.
func TestQueryUnderWriteLock(t *testing.T) {
	for _, c := range []struct {
		variant procfs.Variant
		addr    uint64
		sleeps  bool
	}{
		{procfs.Before, otherBase, true},
		{procfs.Before, regionBase, true},
		{procfs.After, otherBase, false},
		{procfs.After, regionBase, true},
	} {
		m := mm.New(new(mm.Namespace), machine.MustNamed("x86-64").Features)
		flags := mm.MAP_PRIVATE | mm.MAP_ANONYMOUS | mm.MAP_FIXED
		for _, base := range []uint64{regionBase, otherBase} {
			if _, err := m.Mmap(nil, base, 1<<20, mm.PROT_READ|mm.PROT_WRITE, flags, nil, 0); err != nil {
				t.Fatal(err)
			}
		}
		m.MmapWriteLock(nil)
		m.VMAStartWrite(m.FindVMA(regionBase))
		f, err := procfs.OpenMaps(m, procfs.Options{Variant: c.variant, Waiter: kernel.NewTask(new(kernel.Namespace), "query")})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			q := uapi.ProcmapQuery{Size: uapi.SizeofProcmapQuery, QueryAddr: c.addr}
			done <- f.Query(&q, nil, nil)
		}()
		if c.sleeps {
			waitQueued(m, 1)
			select {
			case err := <-done:
				t.Errorf("%s %#x: the query returned (%v) under the write lock", c.variant, c.addr, err)
			default:
			}
			m.MmapWriteUnlock()
			if err := <-done; err != nil {
				t.Errorf("%s %#x: %v", c.variant, c.addr, err)
			}
			continue
		}
		if err := <-done; err != nil {
			t.Errorf("%s %#x: %v", c.variant, c.addr, err)
		}
		if n := m.MmapLock.Waiters(); n != 0 {
			t.Errorf("%s %#x: %d waiters on mmap_lock", c.variant, c.addr, n)
		}
		m.MmapWriteUnlock()
	}
}

// TestModelRun runs the experiment's model side whole in a small setting
// and checks the shape of what it reports (the figures are timings).
func TestModelRun(t *testing.T) {
	o := Def.NewOptions()
	o.Runs, o.Size = 2, 16<<20
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	var got []Result
	env := experiment.Env{Machine: machine.MustNamed("x86-64"), Variants: Def.Variants, Progress: func(string, ...any) {}}
	if err := Def.Model(context.Background(), o, env, func(r Result) { got = append(got, r) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(Def.Variants)*len(Cases) {
		t.Fatalf("%d results, want %d", len(got), len(Def.Variants)*len(Cases))
	}
	for _, r := range got {
		if r.Target != experiment.Model || len(r.HoldMsRuns) != 2 || r.HoldMs <= 0 || r.SizeBytes != 16<<20 {
			t.Errorf("result %+v", r)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, o := range []Options{{Runs: 0, Size: 1 << 30}, {Runs: 1, Size: 1 << 20}, {Runs: 1, Size: 1<<30 + 1}} {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	if err := experiment.ParseOptions(Def.NewOptions(), "--cases", "bogus"); err == nil || !strings.Contains(err.Error(), `--cases: unknown "bogus"`) {
		t.Errorf("--cases bogus: %v", err)
	}
}

// A case whose runs were none probed reports no query time, and its
// document still encodes (no NaN).
func TestSummarizeUnprobed(t *testing.T) {
	var r Result
	r.Summarize([]Run{{HoldMs: 2}, {HoldMs: 3}})
	if r.Probed != 0 || r.QueryMs != 0 || r.First != 0 || r.HoldMs != 2 {
		t.Errorf("%+v", r)
	}
	if _, err := json.Marshal(r); err != nil {
		t.Error(err)
	}
}

// runSimModel runs the experiment whole on seed 003's machine, simulated.
func runSimModel(t *testing.T, o *Options) []Result {
	t.Helper()
	env := experiment.Env{Target: experiment.Sim, Machine: machine.MustNamed("virtme-ng-4"), Variants: Def.Variants,
		Sim: &experiment.SimRun{Seed: 1, Until: time.Minute}, Progress: func(string, ...any) {}}
	var got []Result
	if err := Def.Model(context.Background(), o, env, func(r Result) { got = append(got, r) }); err != nil {
		t.Fatal(err)
	}
	return got
}

// On a simulated machine the probe separates the designs as the seed says:
// before, every query waits for mprotect's hold of mmap_lock (it sleeps on
// it, and none returns inside the hold); after, a query of another VMA
// returns inside the hold in every run while the control still waits. The
// same seed gives the same results, to the JSON byte, each naming its
// machine.
func TestSimSeparatesDesigns(t *testing.T) {
	o := Def.NewOptions()
	o.Runs, o.Size = 3, 16<<20
	a := runSimModel(t, o)
	b := runSimModel(t, o)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Errorf("two sim runs differ:\n%s\n%s", ja, jb)
	}
	if len(a) != len(Def.Variants)*len(Cases) {
		t.Fatalf("%d results, want %d", len(a), len(Def.Variants)*len(Cases))
	}
	for _, r := range a {
		if r.Target != experiment.Sim || r.Machine != "virtme-ng-4" || r.Probed != o.Runs || r.HoldMs <= 0 {
			t.Errorf("result %+v", r)
		}
		wantFirst, wantBlocked := 0.0, true
		if r.Variant == procfs.After.String() && r.Case == CaseOther {
			wantFirst, wantBlocked = 1, false
		}
		if r.First != wantFirst || (r.QueryBlocked > 0) != wantBlocked {
			t.Errorf("%s %s: returned first %.2f, slept on mmap_lock %.3f ms; want %.0f, slept %v", r.Variant, r.Case, r.First, r.QueryBlocked, wantFirst, wantBlocked)
		}
	}
	for v, want := range map[string]string{procfs.Before.String(): VerdictMmapLock, procfs.After.String(): VerdictPerVMA} {
		other, _ := find(a, experiment.Sim, v, CaseOther)
		same, _ := find(a, experiment.Sim, v, CaseSame)
		if got := Judge(other, same); got != want {
			t.Errorf("%s: verdict %s, want %s", v, got, want)
		}
	}
}
