package redzone

import (
	"context"
	"strings"
	"testing"

	"mmlab/experiment"
	"mmlab/machine"
)

func quiet(variants ...string) experiment.Env {
	return experiment.Env{Machine: machine.MustNamed("x86-64"), Variants: variants, Progress: func(string, ...any) {}}
}

// The three designs on the model: off and jmp-slot leave the red zone
// alone in every call; call finds -8..-32(%rsp) changed in every call but
// the first (the int3 hit that optimizes the site). Every call is a hit,
// and the optimized designs carry a ratio to off.
func TestModel(t *testing.T) {
	o := NewOptions()
	if err := experiment.ParseOptions(o, "--calls", "50", "--samples", "3"); err != nil {
		t.Fatal(err)
	}
	var rs []Result
	if err := RunModel(context.Background(), o, quiet(Def.Variants...), func(r Result) { rs = append(rs, r) }); err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 {
		t.Fatalf("%d results", len(rs))
	}
	const calls = 50 * 4
	for _, r := range rs {
		wantBad, wantMask := uint64(0), uint64(0)
		if r.Variant == "call" {
			wantBad, wantMask = calls-1, 0x0f
		}
		if r.Calls != calls || r.Hits != calls || r.Corrupted != wantBad || r.Mask != wantMask || len(r.MopsRuns) != 3 {
			t.Errorf("%s: %+v; want %d calls and hits, %d corrupted, mask %#x, 3 samples", r.Variant, r, calls, wantBad, wantMask)
		}
		if (r.VsInt3 == nil) != (r.Variant == "off") {
			t.Errorf("%s: ratio %v", r.Variant, r.VsInt3)
		}
	}
	if line, failed := Verdict(o, rs); line != "" || failed {
		t.Errorf("model-only verdict %q, failed %v", line, failed)
	}
	var b strings.Builder
	Table(&b, o, rs)
	if !strings.Contains(b.String(), "-8,-16,-24,-32(%rsp)") {
		t.Errorf("table:\n%s", b.String())
	}
}

// The verdict comes from the live nop5 results; a model design other than
// call that corrupted the red zone fails the check.
func TestVerdict(t *testing.T) {
	live := func(site string, bad, mask uint64) Result {
		return Result{Row: experiment.LiveRow, Attach: "perf", Site: site,
			Calls: 100, Corrupted: bad, Mask: mask}
	}
	model := func(v string, bad uint64) Result {
		return Result{Row: experiment.Row{Target: experiment.Model, Variant: v}, Corrupted: bad, Mask: 1}
	}
	for _, c := range []struct {
		rs     []Result
		want   string
		failed bool
	}{
		{[]Result{live(SiteNop, 0, 0), live(SiteNop5, 99, 0xf)}, "verdict: this kernel's nop5 optimization clobbers a probed function's red zone: 99 of 100 calls found -8,-16,-24,-32(%rsp) changed (perf uprobes)", false},
		{[]Result{live(SiteNop5, 0, 0)}, "verdict: this kernel leaves a probed function's red zone alone: 100 calls, none found a word changed (perf uprobes)", false},
		{[]Result{live(SiteNop, 5, 1)}, "", false},
		{[]Result{model("call", 9), live(SiteNop5, 0, 0)}, "verdict: this kernel leaves", false},
		{[]Result{model("jmp-slot", 9)}, "verdict: model error: the jmp-slot design", true},
	} {
		line, failed := Verdict(nil, c.rs)
		if !strings.HasPrefix(line, c.want) || (c.want == "") != (line == "") || failed != c.failed {
			t.Errorf("%+v: %q, %v; want %q, %v", c.rs, line, failed, c.want, c.failed)
		}
	}
}
