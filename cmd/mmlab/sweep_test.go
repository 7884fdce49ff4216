package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"mmlab/deploy"
	"mmlab/experiment"
	"mmlab/experiment/refscale"
	"mmlab/experiment/seeds"
	"mmlab/report"
)

// sweepMachine is the simulated machine of the test seed's sim step.
const sweepMachine = "xeon-gold-6138-2s"

// sweepSeeds is one test seed of one step, refscale, given a sim step on
// sweepMachine whose full setting is a sweep of two points, one reader
// count each: seconds of host time in all.
func sweepSeeds() []*seeds.Seed {
	small := []string{"--types", "refcnt,srcu", "--loops", "100", "--runs", "2"}
	readers := func(n string) []string { return append([]string{"--readers", n}, small...) }
	st := seeds.StepOf(refscale.Def)
	st.Smoke = readers("1")
	st.Sim = &experiment.SimSettings{Machine: sweepMachine, Quick: readers("1"), Smoke: readers("1"), Full: readers("1,2"),
		Points: [][]string{readers("1"), readers("2")}}
	return []*seeds.Seed{{ID: "test", Steps: []seeds.Step{st}}}
}

// runAllMain runs mmlab all of the seeds all in this process and returns
// its exit status, stdout and stderr.
func runAllMain(t *testing.T, all []*seeds.Seed, args ...string) (int, string, string) {
	t.Helper()
	errf, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	var out bytes.Buffer
	code := allMain(context.Background(), args, all, &out, errf)
	errs, err := os.ReadFile(errf.Name())
	if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), string(errs)
}

// resultsJSON returns the results of the document b, each as compact
// JSON, sorted.
func resultsJSON(t *testing.T, b []byte) []string {
	t.Helper()
	var doc struct{ Results []json.RawMessage }
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var rs []string
	for _, r := range doc.Results {
		var buf bytes.Buffer
		json.Compact(&buf, r)
		rs = append(rs, buf.String())
	}
	slices.Sort(rs)
	return rs
}

// The Indexed Job's command, run here for completion indexes 0 and 1 into
// two directories, writes one point each; mmlab report merges them into
// one document holding both points' results in point order, the results a
// full run in one process gives.
func TestSweepJobLocally(t *testing.T) {
	all := sweepSeeds()
	args, err := deploy.SweepArgs()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir() // the Job's shared volume, mounted at /results
	var dirs []string
	for i := range 2 {
		a := deploy.ForIndex(args, i)
		at := slices.Index(a, "--out") + 1
		rel, ok := strings.CutPrefix(a[at], "/results/")
		if at == 0 || !ok {
			t.Fatalf("args %q: no --out /results/...", a)
		}
		a[at] = filepath.Join(root, rel)
		if a[0] != "all" {
			t.Fatalf("args %q: not mmlab all", a)
		}
		code, out, errs := runAllMain(t, all, a[1:]...)
		if code != experiment.ExitOK {
			t.Fatalf("mmlab %s: exit %d\n%s%s", strings.Join(a, " "), code, out, errs)
		}
		docs, err := seeds.ReadDocs(a[at])
		if err != nil || len(docs) != 1 || docs[seeds.SimKey("refscale")] == nil {
			t.Fatalf("point %d saved %d documents (%v), want its sim document alone", i, len(docs), err)
		}
		dirs = append(dirs, a[at])
	}

	// mmlab report of both directories builds the report of the merge.
	var out, errs bytes.Buffer
	page := t.TempDir()
	if code := reportMain(append(slices.Clone(dirs), "-o", page), all, &out, &errs); code != experiment.ExitOK || errs.Len() > 0 {
		t.Fatalf("mmlab report: exit %d\n%s%s", code, out.String(), errs.String())
	}
	if _, err := os.Stat(filepath.Join(page, "index.html")); err != nil {
		t.Fatal(err)
	}
	sets, bad, err := seeds.Load(all, []string{dirs[1], dirs[0]})
	if err != nil || len(bad) > 0 || len(sets) != 1 || len(sets[0].Incomplete()) > 0 {
		t.Fatalf("%d sets, %v, %v", len(sets), err, bad)
	}
	merged := sets[0].Docs[seeds.SimKey("refscale")]
	doc, err := report.Read[*refscale.Options, refscale.Result](merged)
	if err != nil {
		t.Fatal(err)
	}
	var readers []int
	for _, r := range doc.Results {
		readers = append(readers, r.Readers)
		if r.Target != experiment.Sim {
			t.Errorf("a merged result of target %s", r.Target)
		}
	}
	if !slices.Equal(readers, []int{1, 1, 2, 2}) || !slices.Equal(doc.Params.Readers, []int{1, 2}) || doc.Point != nil {
		t.Errorf("merged results of readers %v, params %+v, point %v; want both points' in order, readers 1,2, no point", readers, doc.Params, doc.Point)
	}
	if doc.ModelMachine == nil || doc.ModelMachine.Name != sweepMachine {
		t.Errorf("merged model machine %+v, want %s", doc.ModelMachine, sweepMachine)
	}

	// The full setting in one process gives the same results.
	whole := t.TempDir()
	if code, out, errs := runAllMain(t, all, "--full", "--target", "sim", "--quiet", "--out", whole); code != experiment.ExitOK {
		t.Fatalf("mmlab all --full --target sim: exit %d\n%s%s", code, out, errs)
	}
	b, err := os.ReadFile(filepath.Join(whole, seeds.SimDir, "refscale.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := resultsJSON(t, merged), resultsJSON(t, b); !slices.Equal(got, want) {
		t.Errorf("merged points' results\n\t%s\nwant the full run's\n\t%s", got, want)
	}
}

// --target and --no-sim choose the steps: sim alone, model and live
// without sim, or both, each sim step saving in DIR/sim with its log.
func TestAllSimSteps(t *testing.T) {
	all := sweepSeeds()
	for _, c := range []struct {
		args       []string
		model, sim bool
	}{
		{[]string{"--target", "sim"}, false, true},
		{[]string{"--target", "model", "--no-sim"}, true, false},
		{[]string{"--target", "model"}, true, true},
	} {
		dir := t.TempDir()
		args := append([]string{"--smoke", "--quiet", "--out", dir}, c.args...)
		if code, out, errs := runAllMain(t, all, args...); code != experiment.ExitOK {
			t.Fatalf("mmlab all %q: exit %d\n%s%s", args, code, out, errs)
		}
		docs, err := seeds.ReadDocs(dir)
		if err != nil {
			t.Fatal(err)
		}
		if (docs["refscale"] != nil) != c.model || (docs[seeds.SimKey("refscale")] != nil) != c.sim {
			t.Errorf("mmlab all %q: model document %v, sim document %v; want %v and %v", args,
				docs["refscale"] != nil, docs[seeds.SimKey("refscale")] != nil, c.model, c.sim)
		}
		if !c.sim {
			continue
		}
		log, err := os.ReadFile(filepath.Join(dir, seeds.SimDir, "refscale.txt"))
		want := "$ mmlab run refscale --readers 1 --types refcnt,srcu --loops 100 --runs 2 --target sim --machine " + sweepMachine + " --out " + filepath.Join(dir, seeds.SimDir) + "\n"
		if err != nil || !strings.HasPrefix(string(log), want) {
			t.Errorf("mmlab all %q: sim log %q (%v), want it to start %q", args, log, err, want)
		}
	}
}

// --points lists the full setting's points; --point refuses a value that
// names none, naming the flag, the value and the range, and so do the
// combinations that do not apply.
func TestAllPointsFlags(t *testing.T) {
	all := sweepSeeds()
	code, out, errs := runAllMain(t, all, "--full", "--points")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != experiment.ExitOK || len(lines) != 2 || !strings.HasPrefix(lines[0], "0\trefscale\t"+sweepMachine+"\t") ||
		!strings.HasSuffix(lines[1], "\t--readers 2 --types refcnt,srcu --loops 100 --runs 2") || !strings.HasPrefix(errs, "2 points") {
		t.Errorf("--points: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	for _, c := range []struct {
		args []string
		says []string
	}{
		{[]string{"--full", "--point", "2"}, []string{"--point 2", "from 0 to 1"}},
		{[]string{"--full", "--point", "-1"}, []string{"--point -1", "from 0 to 1"}},
		{[]string{"--full", "--point", "x"}, []string{"--point x", "from 0 to 1"}},
		{[]string{"--point", "0"}, []string{"--point", "--full"}},
		{[]string{"--points"}, []string{"--points", "--full"}},
		{[]string{"--full", "--point", "0", "--no-sim"}, []string{"--point", "--no-sim"}},
		{[]string{"--full", "--point", "0", "--target", "model"}, []string{"--point", "--target"}},
		{[]string{"--target", "sim", "--no-sim"}, []string{"--target sim", "--no-sim"}},
	} {
		code, out, errs := runAllMain(t, all, append(c.args, "--out", t.TempDir())...)
		if code != experiment.ExitUsage || out != "" || strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and one line", c.args, code, out, errs)
		}
		for _, s := range c.says {
			if !strings.Contains(errs, s) {
				t.Errorf("%q: %q does not say %q", c.args, errs, s)
			}
		}
	}
	// The seeds of this mmlab: the point named is refused with what is there.
	if code, _, errs := runMmlab(t, "all", "--full", "--point", "100000"); code != experiment.ExitUsage || !strings.Contains(errs, "--point 100000") {
		t.Errorf("mmlab all --full --point 100000: exit %d, %q", code, errs)
	}
}
