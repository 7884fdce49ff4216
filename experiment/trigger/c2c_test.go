package trigger

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"mmlab/experiment"
	"mmlab/report"
)

// --c2c on the sim target gives each kernel's result the contention
// profile of its run, with the lines that v6.14+'s uprobe hit path
// (handle_swbp → find_active_uprobe_rcu: the uprobes tree under its
// seqcount, then handler_chain over the uprobe's consumers) reads on each
// hit; the saved document loads as the report's loader checks it, and the
// table prints each profile after the rates, headed by its kernel.
func TestSimC2C(t *testing.T) {
	e := experiment.Bind(Def, nil)
	args := []string{"--target", "sim", "--machine", "x86-64", "--cpus", "2", "--cases", "uprobe-nop",
		"--variant", "v6.14+", "--warmup", "0s", "--duration", "2ms", "--interval", "1ms", "--c2c"}
	var out, errb strings.Builder
	if code := e.Main(context.Background(), append(args, "--json"), &out, &errb); code != experiment.ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	doc, err := report.Read[*Options, Result]([]byte(out.String()))
	if err != nil {
		t.Fatalf("the document with profiles does not load: %v", err)
	}
	if len(doc.Results) != 1 || doc.Results[0].C2C == nil || doc.Results[0].C2C.Profile == nil {
		t.Fatalf("results %+v: want one with a profile", doc.Results)
	}
	r := doc.Results[0]
	c := r.C2C
	if c.Ops == 0 || c.Ops < r.Hits || c.Profile.CPUs != 2 || c.Profile.Machine != "x86-64" {
		t.Errorf("profile of %d hits (%d in the samples) on %d CPUs of %q", c.Ops, r.Hits, c.Profile.CPUs, c.Profile.Machine)
	}
	lines := map[string]int64{}
	for _, l := range c.Profile.Lines {
		lines[l.Name] = l.Loads
	}
	for _, name := range []string{"uprobes_tree", "uprobes_seqcount", "uprobe.consumers"} {
		if loads, ok := lines[name]; !ok || loads < int64(c.Ops) {
			t.Errorf("line %s: %d loads (present %v), want one per hit at least (%d); lines %v", name, loads, ok, c.Ops, lines)
		}
	}

	out.Reset()
	if code := e.Main(context.Background(), args, &out, &errb); code != experiment.ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	tab := out.String()
	head := "sim v6.14+, uprobe-nop (2 cpus): contention profile of the run"
	if i, j := strings.Index(tab, "uprobe-nop ( 2 cpus):"), strings.Index(tab, head); i < 0 || j < i || !strings.Contains(tab[j:], "Shared Data Cache Line Table") {
		t.Errorf("table without the profile after the rates, headed %q:\n%s", head, tab)
	}
}

// Without --c2c a result has no profile and the document no c2c key; on
// a target other than sim --c2c is a usage error naming the flag.
func TestC2COnlySim(t *testing.T) {
	e := experiment.Bind(Def, nil)
	args := []string{"--target", "sim", "--machine", "x86-64", "--cpus", "1", "--cases", "uprobe-nop",
		"--variant", "v6.14+", "--warmup", "0s", "--duration", "1ms", "--interval", "1ms", "--json"}
	var out, errb strings.Builder
	if code := e.Main(context.Background(), args, &out, &errb); code != experiment.ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(out.String()), &doc); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), `"c2c"`) {
		t.Errorf("a document without --c2c has a c2c key:\n%s", out.String())
	}
	for _, target := range []string{"model", "live", "both", "model,sim"} {
		err := e.Check([]string{"--target", target, "--machine", "x86-64", "--c2c"})
		if err == nil || !strings.Contains(err.Error(), "--c2c") {
			t.Errorf("--target %s --c2c: %v, want a usage error naming --c2c", target, err)
		}
	}
}
