package forkstall

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"mmlab/experiment"
)

// parse returns the options of the command line args, validated.
func parse(t *testing.T, args ...string) *Options {
	t.Helper()
	o := Def.NewOptions()
	fs := flag.NewFlagSet("forkstall", flag.ContinueOnError)
	o.Flags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestOptionsDefaults(t *testing.T) {
	o := parse(t)
	if o.Runs != 9 || o.Size != 2<<30 || !slices.Equal(o.Cases, Cases[:3]) || !slices.Equal(o.Modes, Modes) {
		t.Errorf("defaults: %+v", o)
	}
	if o := parse(t, "--full"); !slices.Equal(o.Cases, Cases) {
		t.Errorf("--full: cases %v", o.Cases)
	}
	if o := parse(t, "--full", "--cases", "idle-1000", "--size", "64M"); !slices.Equal(o.Cases, []string{CaseIdle1000}) || o.Size != 64<<20 {
		t.Errorf("--full --cases idle-1000 --size 64M: %+v", o)
	}
}

// Every bad flag is refused by Validate, with the flag and the value in the
// message, and `mmlab run forkstall` exits 2 before it runs anything.
func TestOptionsRejected(t *testing.T) {
	ran := false
	def := Def
	def.Model = func(context.Context, *Options, experiment.Env, func(Result)) error { ran = true; return nil }
	for _, c := range []struct{ args []string }{
		{[]string{"--runs", "0"}},
		{[]string{"--runs", "-1"}},
		{[]string{"--cases", "busy-maps,nope"}},
		{[]string{"--cases", ","}},
		{[]string{"--modes", "multi-2"}},
		{[]string{"--modes", ""}},
		{[]string{"--size", "0"}},
		{[]string{"--size", "-1G"}},
		{[]string{"--size", "1T"}},
		{[]string{"--size", "1 G"}},
		{[]string{"--size", "17179869184G"}},
	} {
		var stderr strings.Builder
		code := experiment.Bind(def, nil).Main(context.Background(), append([]string{"--target", "model"}, c.args...), io.Discard, &stderr)
		flagName := strings.TrimPrefix(c.args[0], "--")
		if code != experiment.ExitUsage || !strings.Contains(stderr.String(), "--"+flagName) {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, stderr.String())
		}
	}
	if ran {
		t.Error("the model ran despite a bad flag")
	}
}

// keys returns the JSON keys of v.
func keys(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(maps.Keys(m))
}

// The results carry every key of the schema-1 documents of both targets
// (live results add forks and forks_runs), and the params those of the
// options.
func TestResultKeys(t *testing.T) {
	common := []string{"attach_ms", "attach_ms_runs", "baseline_ms", "baseline_ms_runs", "case", "detach_ms", "detach_ms_runs",
		"fork_max_ms", "fork_max_ms_runs", "forks", "forks_runs", "mode", "size_bytes", "target", "variant"}
	model := append(slices.Clone(common), "attach_blocked_dup_mmap_sem_ms", "attach_blocked_dup_mmap_sem_ms_runs",
		"attach_blocked_mmap_lock_ms", "attach_blocked_mmap_lock_ms_runs", "baseline_blocked_dup_mmap_sem_ms",
		"baseline_blocked_dup_mmap_sem_ms_runs", "baseline_blocked_mmap_lock_ms", "baseline_blocked_mmap_lock_ms_runs",
		"busy_hold_ms", "busy_hold_ms_runs", "fork_blocked_dup_mmap_sem_ms", "fork_blocked_dup_mmap_sem_ms_runs",
		"fork_blocked_mmap_lock_ms", "fork_blocked_mmap_lock_ms_runs", "gc_in_windows", "gc_in_windows_runs",
		"passes", "passes_runs")
	live := append(slices.Clone(common), "verdict")
	slices.Sort(model)
	slices.Sort(live)
	runs := []Run{{ForkMaxMs: 3, Passes: 0}, {ForkMaxMs: 1, Passes: 2}}
	m := NewResult(experiment.Row{Target: experiment.Model, Variant: "before"}, CaseBusyMaps, ModeMulti1, 4096, runs)
	if got := keys(t, m); !slices.Equal(got, model) {
		t.Errorf("model keys\n got %v\nwant %v", got, model)
	}
	l := NewResult(experiment.LiveRow, CaseIdle1000, ModeMulti1, 4096, runs)
	if got := keys(t, l); !slices.Equal(got, live) {
		t.Errorf("live keys\n got %v\nwant %v", got, live)
	}
	if m.SizeBytes != 4096 || l.SizeBytes != 0 || m.ForkMaxMs != 1 || !slices.Equal(m.ForkMaxMsRuns, []float64{3, 1}) || m.Passes != 0 {
		t.Errorf("figures: model %+v live %+v", m, l)
	}
	if got := keys(t, parse(t)); !slices.Equal(got, []string{"cases", "modes", "runs", "size_bytes"}) {
		t.Errorf("params %v", got)
	}
}

func TestJudge(t *testing.T) {
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
		if got := Judge(c.x, c.y); got != c.want {
			t.Errorf("Judge(%v, %v) = %s, want %s", c.x, c.y, got, c.want)
		}
	}
}

// The verdict judges the live result with the longest fork; the model's
// results do not count, and without live results there is none.
func TestLiveVerdict(t *testing.T) {
	res := func(target experiment.Target, fork, base float64) Result {
		return Result{Row: experiment.Row{Target: target}, ForkMaxMs: fork, BaselineMs: base}
	}
	rs := []Result{res(experiment.Model, 900, 1), res(experiment.Live, 8.73, 0.49), res(experiment.Live, 259, 0.705), res(experiment.Live, 100, 50)}
	if v, line := LiveVerdict(rs); v != "stalls" || line != "verdict: stalls fork_max_ms=259.00 baseline_ms=0.70" {
		t.Errorf("LiveVerdict = %q, %q", v, line)
	}
	if v, line := LiveVerdict(rs[:2]); v != "ok" || line != "verdict: ok fork_max_ms=8.73 baseline_ms=0.49" {
		t.Errorf("LiveVerdict = %q, %q", v, line)
	}
	if v, line := LiveVerdict(rs[:1]); v != "" || line != "" {
		t.Errorf("model only: %q, %q", v, line)
	}
	if line, failed := Def.Verdict(parse(t), rs); failed || !strings.HasPrefix(line, "verdict: stalls") {
		t.Errorf("Def.Verdict = %q, %v", line, failed)
	}
}

// The live table has one column per metric and the quiet fork; a missing
// result prints "-".
func TestTableLive(t *testing.T) {
	o := parse(t, "--runs", "3")
	live := experiment.LiveRow
	rs := []Result{
		{Row: live, Case: CaseBusyMaps, Mode: ModeMulti1, ForkMaxMs: 259, AttachMs: 61.1, DetachMs: 295, BaselineMs: 0.705},
		{Row: live, Case: CaseIdle1000, Mode: ModeMulti1, ForkMaxMs: 8.73, AttachMs: 15.4, DetachMs: 31.4, BaselineMs: 0.488},
	}
	var out strings.Builder
	Table(&out, o, rs)
	want := `
forkstall, live (median of 3 runs; ms)
                                        fork() ms  attach ms  detach ms  quiet fork ms
                                        kernel     kernel     kernel
the busy process maps the file
  uprobe_multi, 1 uprobe                259        61.1       295        0.705
nobody keeps mmap_lock busy, 1000 processes map the file
  uprobe_multi, 1 uprobe                8.73       15.4       31.4       0.488
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
	model := experiment.Row{Target: experiment.Model, Variant: "before"}
	out.Reset()
	Table(&out, o, []Result{{Row: model, Case: CaseBusyMaps, Mode: ModeMulti1, ForkMaxMs: 301},
		{Row: experiment.Row{Target: experiment.Model, Variant: "after"}, Case: CaseBusyMaps, Mode: ModeMulti4, ForkMaxMs: 0.34}})
	if !strings.Contains(out.String(), "  uprobe_multi, 1 uprobe                301      -") {
		t.Errorf("missing variant not shown as -:\n%s", out.String())
	}
}

// The sim step runs on seed 000's machine; its settings parse, the full one
// is the seed's table (4 GiB, every case and mode), and its points are the
// full setting split by case and mode.
func TestSimSettings(t *testing.T) {
	s := Def.Settings().Sim
	if s == nil || s.Machine != "epyc-vm-32" {
		t.Fatalf("sim settings %+v", s)
	}
	for _, args := range append([][]string{s.Quick, s.Full, s.Smoke}, s.Points...) {
		o := parse(t, args...)
		if o.Runs < 1 {
			t.Errorf("%v: %+v", args, o)
		}
	}
	o := parse(t, s.Full...)
	if o.Size != 4<<30 || !slices.Equal(o.Cases, Cases) || !slices.Equal(o.Modes, Modes) {
		t.Errorf("full: %+v", o)
	}
	if len(s.Points) != len(Cases)*len(Modes) {
		t.Errorf("%d points, want %d", len(s.Points), len(Cases)*len(Modes))
	}
}
