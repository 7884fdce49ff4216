package attach

import (
	"context"
	"strings"
	"testing"

	"mmlab/experiment"
	"mmlab/uprobes"
)

// measure runs every (variant, mode, n) once per run, in turn, and leaves
// no uprobe behind.
func TestMeasure(t *testing.T) {
	runs, err := measure(context.Background(), modelConfig{Variants: uprobes.Variants,
		Modes: []string{ModeMulti, ModePerf}, Ns: []int{1, 4}, Runs: 2, Procs: 3, CPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	nv := len(uprobes.Variants)
	if len(runs) != 2*2*2*nv {
		t.Fatalf("%d runs, want %d", len(runs), 2*2*2*nv)
	}
	for i, r := range runs {
		if r.Variant != uprobes.Variants[i%nv].Name || r.Attach <= 0 || r.Detach <= 0 {
			t.Errorf("run %d: %+v", i, r)
		}
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
	params := map[string]any{}
	env := experiment.Env{Variants: Def.Variants, Progress: func(string, ...any) {}, Param: func(k string, v any) { params[k] = v }}
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
	}
	if params["model_procs"] != modelProcs || params["model_cpus"] != modelCPUs {
		t.Errorf("params %v", params)
	}
	var b strings.Builder
	Table(&b, o, rs)
	if !strings.HasPrefix(b.String(), "attach/detach, model srcu (median of 2 runs [min-max], ms)\n") {
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
