package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"mmlab/machine"
	"mmlab/report"
)

// A toy experiment: N results per target, each variant's value its index.
type toyOptions struct {
	N int `json:"n"`
}

func (o *toyOptions) Flags(fs *flag.FlagSet) { fs.IntVar(&o.N, "n", o.N, "results per variant") }
func (o *toyOptions) Validate() error {
	if o.N < 1 {
		return fmt.Errorf("--n %d: want at least 1", o.N)
	}
	return nil
}

type toyResult struct {
	Row
	Value int `json:"value"`
}

func toyDef(model Runner[*toyOptions, toyResult]) Def[*toyOptions, toyResult] {
	return Def[*toyOptions, toyResult]{
		Name: "toy", Seed: "000", Summary: "a toy", Help: "usage: toy\n",
		Variants:   []string{"before", "after"},
		NewOptions: func() *toyOptions { return &toyOptions{N: 1} },
		Model:      model,
		Sim:        true,
		Table: func(w io.Writer, o *toyOptions, rs []toyResult) {
			for _, r := range rs {
				fmt.Fprintf(w, "%s %s %d\n", r.Target, r.Variant, r.Value)
			}
		},
		Verdict: func(o *toyOptions, rs []toyResult) (string, bool) {
			return fmt.Sprintf("verdict: %d results", len(rs)), len(rs) > 5
		},
	}
}

func emitAll(ctx context.Context, o *toyOptions, env Env, emit func(toyResult)) error {
	for _, v := range env.Variants {
		for i := range o.N {
			emit(toyResult{env.Row(v), i})
		}
	}
	return nil
}

func run(t *testing.T, e Experiment, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = e.Main(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestMainRunsVariantsAndJudges(t *testing.T) {
	live := func(ctx context.Context, o *toyOptions, env Env, emit func(toyResult)) error {
		emit(toyResult{Row{Live, env.Variants[0]}, 7})
		return nil
	}
	e := Bind(toyDef(emitAll), live)
	code, out, _ := run(t, e, context.Background(), "--n", "2")
	want := "model before 0\nmodel before 1\nmodel after 0\nmodel after 1\nlive kernel 7\nverdict: 5 results\n"
	if code != ExitOK || out != want {
		t.Errorf("code %d, out\n%s\nwant\n%s", code, out, want)
	}
	// One result more and the verdict fails the run.
	if code, _, _ := run(t, e, context.Background(), "--n", "3", "--variant", "after,before"); code != ExitFailed {
		t.Errorf("failed verdict: exit %d, want %d", code, ExitFailed)
	}
}

func TestMainUsageErrors(t *testing.T) {
	e := Bind(toyDef(emitAll), nil)
	for _, args := range [][]string{
		{"--target", "mars"}, {"--variant", "bogus"}, {"--n", "0"}, {"--bogus"}, {"extra"}, {"--target", "live"},
	} {
		code, out, errs := run(t, e, context.Background(), args...)
		if code != ExitUsage || out != "" || errs == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2, a message and no output", args, code, out, errs)
		}
	}
	for _, args := range [][]string{{"--target", "mars"}, {"--n", "0"}} {
		_, _, errs := run(t, e, context.Background(), args...)
		if !strings.Contains(errs, args[0]) || !strings.Contains(errs, args[1]) {
			t.Errorf("%v: message %q does not name the flag and the value", args, errs)
		}
	}
	if code, _, _ := run(t, e, context.Background(), "--help"); code != ExitOK {
		t.Errorf("--help exits %d", code)
	}
}

// --target sim runs the model runner on a simulated machine's
// description, with the run's seed and bound, its results saying sim.
func TestMainSim(t *testing.T) {
	t.Setenv(machine.HostFileEnv, filepath.Join(t.TempDir(), "none.json"))
	var envs []Env
	model := func(ctx context.Context, o *toyOptions, env Env, emit func(toyResult)) error {
		envs = append(envs, env)
		return emitAll(ctx, o, env, emit)
	}
	live := func(ctx context.Context, o *toyOptions, env Env, emit func(toyResult)) error {
		emit(toyResult{LiveRow, 7})
		return nil
	}
	e := Bind(toyDef(model), live)
	code, out, errs := run(t, e, context.Background(), "--target", "sim,model", "--machine", "x86-64", "--sim-seed", "7", "--variant", "after")
	if want := "model after 0\nsim after 0\nverdict: 2 results\n"; code != ExitOK || out != want {
		t.Fatalf("code %d, out\n%s\nwant\n%s\nstderr %s", code, out, want, errs)
	}
	if len(envs) != 2 || envs[0].Target != Model || envs[0].Sim != nil || envs[1].Target != Sim ||
		*envs[1].Sim != (SimRun{Seed: 7, Until: DefaultSimUntil}) || envs[1].Machine.Costs.Int3.NS == 0 {
		t.Errorf("envs %+v", envs)
	}
	for _, args := range [][]string{
		{"--target", "sim"}, // host, not calibrated
		{"--target", "sim,sim", "--machine", "x86-64"},
		{"--target", "sim,live", "--machine", "x86-64"},
		{"--target", "sim", "--machine", "x86-64", "--sim-until", "0s"},
	} {
		code, out, errs := run(t, e, context.Background(), args...)
		if code != ExitUsage || out != "" || errs == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2, a message and no output", args, code, out, errs)
		}
		if len(args) == 2 && !strings.Contains(errs, "mmlab calibrate") {
			t.Errorf("%v: %q does not name mmlab calibrate", args, errs)
		}
	}
	// A runner whose results do not say the target they ran on fails.
	wrong := Bind(toyDef(func(ctx context.Context, o *toyOptions, env Env, emit func(toyResult)) error {
		emit(toyResult{Row{Model, "after"}, 0})
		return nil
	}), nil)
	if code, _, errs := run(t, wrong, context.Background(), "--target", "sim", "--machine", "x86-64"); code != ExitFailed || !strings.Contains(errs, "says target model") {
		t.Errorf("a sim result saying model: exit %d, stderr %q", code, errs)
	}
	// A model runner that does not run on simulated machines is refused.
	d := toyDef(emitAll)
	d.Sim = false
	if code, _, errs := run(t, Bind(d, nil), context.Background(), "--target", "sim", "--machine", "x86-64"); code != ExitUsage || !strings.Contains(errs, "simulated machine") {
		t.Errorf("sim on a runner without it: exit %d, stderr %q", code, errs)
	}
}

func TestParseTargets(t *testing.T) {
	for in, want := range map[string][]Target{
		"both": {Model, Live}, "model": {Model}, "live,sim": {Sim, Live}, "sim,live,model": {Model, Sim, Live},
	} {
		if got, err := ParseTargets(in); err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseTargets(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "mars", "model,model", "both,sim"} {
		if _, err := ParseTargets(in); err == nil {
			t.Errorf("ParseTargets(%q): no error", in)
		}
	}
}

func TestMainLiveNotSupported(t *testing.T) {
	live := func(ctx context.Context, o *toyOptions, env Env, emit func(toyResult)) error {
		return fmt.Errorf("forkstall: %w", &machine.UnsupportedError{What: "needs root"})
	}
	e := Bind(toyDef(emitAll), live)
	code, out, errs := run(t, e, context.Background(), "--json")
	if code != ExitOK || !strings.Contains(errs, "live part skipped") {
		t.Errorf("both targets: exit %d, stderr %q; want 0 and the skip named", code, errs)
	}
	var doc struct {
		SchemaVersion int               `json:"schema_version"`
		Skipped       []string          `json:"skipped"`
		Params        map[string]any    `json:"params"`
		Results       []json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SchemaVersion != report.SchemaVersion || len(doc.Skipped) != 1 || doc.Params["n"] != 1.0 || len(doc.Results) != 2 {
		t.Errorf("document %+v", doc)
	}
	// Asked for explicitly, the live part that cannot run fails the run.
	if code, _, _ := run(t, e, context.Background(), "--target", "live"); code != ExitFailed {
		t.Errorf("--target live not supported: exit %d, want 1", code)
	}
}

func TestMainInterruptedKeepsFinished(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	model := func(ctx context.Context, o *toyOptions, env Env, emit func(toyResult)) error {
		emit(toyResult{Row{Model, env.Variants[0]}, 1})
		cancel()
		return ctx.Err()
	}
	dir := t.TempDir()
	e := Bind(toyDef(model), func(context.Context, *toyOptions, Env, func(toyResult)) error {
		t.Error("the live part ran after the interrupt")
		return nil
	})
	code, out, errs := run(t, e, ctx, "--out", dir)
	if code != ExitInterrupted || out != "model before 1\n" || !strings.Contains(errs, "interrupted") {
		t.Errorf("exit %d, out %q, err %q", code, out, errs)
	}
	b, err := os.ReadFile(filepath.Join(dir, "toy.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"interrupted": true`)) || !bytes.Contains(b, []byte(`"value": 1`)) {
		t.Errorf("saved document lacks the interrupt or the finished result:\n%s", b)
	}
}

func TestListAndOneOf(t *testing.T) {
	if _, err := List("cases", "a,c", "a", "b"); err == nil || !strings.Contains(err.Error(), `"c"`) {
		t.Errorf("List unknown item: %v", err)
	}
	if got, err := List("cases", "b,a", "a", "b"); err != nil || strings.Join(got, ",") != "b,a" {
		t.Errorf("List = %v, %v", got, err)
	}
	if _, err := List("cases", "", "a"); err == nil {
		t.Error("List accepts an empty value")
	}
	if err := OneOf("target", "x", "model"); err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Error("OneOf accepts x")
	}
}

func TestBytes(t *testing.T) {
	for in, want := range map[string]Bytes{"4096": 4096, "128M": 128 << 20, "1G": 1 << 30, "3K": 3072, "0": 0} {
		var b Bytes
		if err := b.Set(in); err != nil || b != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
		if back := want.String(); back != in && !(in == "4096" && back == "4K") {
			t.Errorf("%d.String() = %q, want %q", want, back, in)
		}
	}
	for _, bad := range []string{"", "-1", "1T", "1.5G", "G", "99999999999G"} {
		var b Bytes
		if err := b.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted: %d", bad, b)
		}
	}
}

// --machine chooses the machine of the model runner's Env and the
// document's model_machine; "host" (the default) is machine.Host(). A named
// machine with a live part, or an unknown name, is a usage error that names
// the flag and the value (and, unknown, the names allowed).
func TestMainMachine(t *testing.T) {
	var got []machine.Description
	model := func(ctx context.Context, o *toyOptions, env Env, emit func(toyResult)) error {
		got = append(got, env.Machine)
		return emitAll(ctx, o, env, emit)
	}
	live := func(ctx context.Context, o *toyOptions, env Env, emit func(toyResult)) error { return nil }
	e := Bind(toyDef(model), live)
	code, out, errs := run(t, e, context.Background(), "--target", "model", "--machine", "x86-64-pku", "--json")
	var doc struct {
		ModelMachine struct {
			Name     string           `json:"name"`
			Features machine.Features `json:"features"`
		} `json:"model_machine"`
	}
	if err := json.Unmarshal([]byte(out), &doc); code != ExitOK || err != nil {
		t.Fatalf("exit %d, %v, stderr %q", code, err, errs)
	}
	pku := machine.MustNamed("x86-64-pku")
	if len(got) != 1 || !reflect.DeepEqual(got[0], pku) || doc.ModelMachine.Name != "x86-64-pku" || doc.ModelMachine.Features != pku.Features {
		t.Errorf("the runner got %+v, the document says %+v; want %+v", got, doc.ModelMachine, pku)
	}
	got = nil
	if code, _, errs := run(t, e, context.Background()); code != ExitOK || len(got) != 1 || !reflect.DeepEqual(got[0], machine.Host()) {
		t.Errorf("default: exit %d, runner got %+v, stderr %q; want machine.Host()", code, got, errs)
	}
	for _, c := range []struct {
		args []string
		want []string // in the message
	}{
		{[]string{"--machine", "x86-64"}, []string{"--machine x86-64", "--target model"}},
		{[]string{"--machine", "x86-64", "--target", "live"}, []string{"--machine x86-64", "--target model"}},
		{[]string{"--machine", "nosuch", "--target", "model"}, append([]string{`--machine "nosuch"`}, machine.Names()...)},
	} {
		code, out, errs := run(t, e, context.Background(), c.args...)
		if code != ExitUsage || out != "" {
			t.Errorf("%q: exit %d, stdout %q; want exit 2, nothing", c.args, code, out)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%q: message %q lacks %q", c.args, errs, w)
			}
		}
	}
	if _, err := ParseMachine("nosuch"); !errors.Is(err, machine.ErrUnknown) {
		t.Errorf("ParseMachine(nosuch) = %v, want machine.ErrUnknown", err)
	}
}

// Args turns options back into the flags that give them: the flags whose
// values differ from the defaults, each variable once, booleans bare.
func TestArgs(t *testing.T) {
	o := &argsOptions{Runs: 1, Cases: []string{"a"}, Wait: Duration(time.Second)}
	defaults := *o
	if got := Args(o, &defaults); len(got) != 0 {
		t.Errorf("Args of the defaults = %q, want none", got)
	}
	if err := ParseOptions(o, "--nsamples", "3", "--cases", "b,a", "--wait", "250ms", "--size", "1G", "--raw"); err != nil {
		t.Fatal(err)
	}
	want := []string{"--cases", "b,a", "--nsamples", "3", "--raw", "--size", "1G", "--wait", "250ms"}
	if got := Args(o, &defaults); !slices.Equal(got, want) {
		t.Errorf("Args = %q, want %q", got, want)
	}
	back := defaults
	if err := ParseOptions(&back, want...); err != nil || !reflect.DeepEqual(&back, o) {
		t.Errorf("the args parse to %+v, %v; want %+v", back, err, o)
	}
}

type argsOptions struct {
	Runs  int
	Cases []string
	Wait  Duration
	Size  Bytes
	Raw   bool
}

func (o *argsOptions) Flags(fs *flag.FlagSet) {
	fs.IntVar(&o.Runs, "runs", o.Runs, "")
	fs.IntVar(&o.Runs, "nsamples", o.Runs, "")
	NamesVar(fs, &o.Cases, "cases", "", "a", "b")
	Var(fs, &o.Wait, "wait", "")
	Var(fs, &o.Size, "size", "")
	fs.BoolVar(&o.Raw, "raw", o.Raw, "")
}

func (o *argsOptions) Validate() error { return nil }

// A Duration's JSON is milliseconds, fractions kept.
func TestDurationJSON(t *testing.T) {
	for _, d := range []time.Duration{0, 250 * time.Millisecond, 2 * time.Second, 500 * time.Microsecond} {
		b, err := json.Marshal(Duration(d))
		var back Duration
		if err != nil || json.Unmarshal(b, &back) != nil || back.D() != d {
			t.Errorf("%v: %s, back %v", d, b, back)
		}
	}
	if b, _ := json.Marshal(Duration(2 * time.Second)); string(b) != "2000" {
		t.Errorf("2s = %s, want 2000", b)
	}
}

// --sweep-point I/N is saved as the document's point; a value that is not
// a point of the sweep is a usage error naming the flag and the value.
func TestMainSweepPoint(t *testing.T) {
	e := Bind(toyDef(emitAll), nil)
	code, out, errs := run(t, e, context.Background(), "--target", "model", "--sweep-point", "1/3", "--json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc report.Document[toyOptions, toyResult]
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Point == nil || *doc.Point != (report.SweepPoint{Index: 1, Of: 3}) {
		t.Errorf("point %+v, want 1 of 3", doc.Point)
	}
	if _, out, _ := run(t, e, context.Background(), "--target", "model", "--json"); strings.Contains(out, `"point"`) {
		t.Error("a run without --sweep-point saves a point")
	}
	for _, v := range []string{"3/3", "-1/3", "0/0", "1", "a/b", "1/2/3"} {
		code, out, errs := run(t, e, context.Background(), "--target", "model", "--sweep-point", v)
		if code != ExitUsage || out != "" || !strings.Contains(errs, "--sweep-point") || !strings.Contains(errs, v) {
			t.Errorf("--sweep-point %s: exit %d, stderr %q; want exit 2 naming the flag and the value", v, code, errs)
		}
	}
}
