package explorer

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"mmlab/experiment"
	"mmlab/machine"
)

func TestOptions(t *testing.T) {
	o := Def.NewOptions()
	if err := experiment.ParseOptions(o); err != nil || !slices.Equal(o.Scenarios, Seed000()) || len(o.Scenarios) != 7 {
		t.Fatalf("defaults %+v, %v", o, err)
	}
	o = Def.NewOptions()
	if err := experiment.ParseOptions(o, "--scenarios", "hit-vs-sync,reg-vs-fork", "--schedules", "5", "--strategy", "pct"); err != nil ||
		!slices.Equal(o.Scenarios, []string{"hit-vs-sync", "reg-vs-fork"}) || o.Schedules != 5 || o.Strategy != "pct" {
		t.Fatalf("%+v, %v", o, err)
	}
	for _, c := range []struct{ args []string }{
		{[]string{"--scenarios", "nosuch"}},
		{[]string{"--schedules", "0"}},
		{[]string{"--strategy", "dfs"}},
	} {
		err := experiment.ParseOptions(Def.NewOptions(), c.args...)
		if err == nil || !strings.Contains(err.Error(), c.args[0]) || !strings.Contains(err.Error(), c.args[1]) {
			t.Errorf("%q: %v, want an error naming the flag and value", c.args, err)
		}
	}
}

// The quick setting's runner: a result per scenario and design; the
// before design fails reg-vs-fork's property, the after design does not,
// and the verdict judges the after design.
func TestModel(t *testing.T) {
	o := Def.NewOptions()
	if err := experiment.ParseOptions(o, "--scenarios", "reg-vs-fork", "--schedules", "50"); err != nil {
		t.Fatal(err)
	}
	var rs []Result
	env := experiment.Env{Machine: machine.MustNamed("x86-64"), Variants: Def.Variants, Progress: func(string, ...any) {}}
	if err := Def.Model(context.Background(), o, env, func(r Result) { rs = append(rs, r) }); err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Variant != "before" || rs[1].Variant != "after" {
		t.Fatalf("results %+v", rs)
	}
	if b := rs[0]; b.Failures != 1 || b.Property == "" || b.ShrunkSteps == 0 || b.ShrunkSteps > 30 || b.Replay == "" {
		t.Errorf("before: %+v", b)
	}
	if a := rs[1]; a.Failures != 0 || a.Schedules != 50 {
		t.Errorf("after: %+v", a)
	}
	line, failed := Def.Verdict(o, rs)
	if failed || !strings.Contains(line, "before, 1 of 1") || !strings.Contains(line, "after, 0 of 1") {
		t.Errorf("verdict %q, failed %v", line, failed)
	}
	rs[1].Failures, rs[1].Property = 1, "x"
	if _, failed := Def.Verdict(o, rs); !failed {
		t.Error("a failure after the patches passed the verdict")
	}
	var b bytes.Buffer
	Def.Table(&b, o, rs[:1])
	if !strings.Contains(b.String(), "reg-vs-fork") || !strings.Contains(b.String(), rs[0].Property) {
		t.Errorf("table:\n%s", b.String())
	}
}
