package seeds

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"mmlab/experiment/explorer"
	"mmlab/experiment/forkstall"
	"mmlab/experiment/mapscan"
	"mmlab/experiment/redzone"
	"mmlab/machine"
	"mmlab/report"
)

// edited returns the JSON of the document saved as dir/name.json with
// edit applied to it as decoded (numbers as written).
func edited(t testing.TB, dir, name string, edit func(doc map[string]any)) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	return b
}

// goodDocs saves a document of mapslock, forkstall (with the model's
// figures), mapscan, redzone (with a probe's cost below 0, a difference)
// and a search of `mmlab explore --json` in dir, all of host node-a.
func goodDocs(t testing.TB, dir string) {
	t.Helper()
	saveLock(t, dir, "node-a", "linux 6.18.44", 1, 0)
	m := report.Machine{Hostname: "node-a", Kernel: "linux 6.18.44", CPUs: 4}
	fork := report.NewDocument[*forkstall.Options, forkstall.Result]("forkstall", machine.MustNamed("x86-64"), forkstall.Def.NewOptions())
	fork.Machine = m
	fork.Results = append(fork.Results, forkstall.Result{Case: forkstall.CaseBusyMaps, Mode: forkstall.ModeMulti1, ForkMaxMs: 300, Forks: 3, ModelFigures: &forkstall.ModelFigures{Passes: 1}})
	scan := report.NewDocument[*mapscan.Options, mapscan.Result]("mapscan", machine.MustNamed("x86-64"), mapscan.NewOptions())
	scan.Machine = m
	scan.Results = append(scan.Results, mapscan.Result{Scanners: mapscan.Cases[0], Runs: 1, OpsRuns: []int{7}, SlowestWaitUS: map[string]float64{"mmap_lock": 12}})
	search := report.NewDocument[explorer.SearchParams, explorer.Result]("explore", machine.MustNamed("x86-64"), explorer.SearchParams{Scenario: "reg-vs-fork", Design: "after", Strategy: "random", Schedules: 5})
	search.Machine = m
	search.Results = append(search.Results, explorer.Result{Scenario: "reg-vs-fork", Schedules: 5})
	rz := report.NewDocument[*redzone.Options, redzone.Result]("redzone", machine.MustNamed("x86-64"), redzone.NewOptions())
	rz.Machine = m
	rz.Results = append(rz.Results, redzone.Result{Attach: redzone.AttachModel, Site: redzone.SiteNop5, HitNs: -1.98, VsInt3: &redzone.VsInt3{HitNsRatio: -0.5}})
	for _, err := range []error{fork.Save(dir), scan.Save(dir), rz.Save(dir), search.Save(dir)} {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// badDoc is a document the loader refuses: the experiment whose good
// document it edits, the edit, the refusal and the message's text after
// the file name.
type badDoc struct {
	name string
	exp  string
	edit func(doc map[string]any)
	is   error
	msg  string
}

func results(doc map[string]any) map[string]any { return doc["results"].([]any)[0].(map[string]any) }
func params(doc map[string]any) map[string]any  { return doc["params"].(map[string]any) }

var badDocs = []badDoc{
	{"newer schema", "mapslock", func(d map[string]any) { d["schema_version"] = 99 }, report.ErrNewerSchema,
		"schema_version: newer than this mmlab reads: got 99, want 1 to 3"},
	{"schema 0", "mapslock", func(d map[string]any) { d["schema_version"] = 0 }, report.ErrDomain,
		"schema_version: out of its domain: got 0, want 1 to 3"},
	{"schema a string", "mapslock", func(d map[string]any) { d["schema_version"] = "3" }, report.ErrType,
		`schema_version: wrong type: got "3", want a whole number`},
	{"unknown experiment", "mapslock", func(d map[string]any) { d["experiment"] = "nosuch" }, report.ErrUnknownExperiment,
		`experiment: an experiment this mmlab does not know: got "nosuch", want one of forkstall, redzone, explore, mapslock, mapscan, maptear, trigger, attach`},
	{"no experiment", "mapslock", func(d map[string]any) { delete(d, "experiment") }, report.ErrNotDocument,
		"not a result document of mmlab: experiment: got null, want the experiment's name"},
	{"results a string", "mapslock", func(d map[string]any) { d["results"] = "x" }, report.ErrType,
		`results: wrong type: got "x", want a list`},
	{"a count a string", "mapslock", func(d map[string]any) { params(d)["runs"] = "4" }, report.ErrType,
		`params.runs: wrong type: got "4", want a whole number of 0 or more`},
	{"a time a bool", "mapslock", func(d map[string]any) { results(d)["hold_ms"] = true }, report.ErrType,
		`results[0].hold_ms: wrong type: got true, want a number of 0 or more`},
	{"a list of bools with a number", "mapslock", func(d map[string]any) { results(d)["returned_first_runs"] = []any{true, 1} }, report.ErrType,
		`results[0].returned_first_runs[1]: wrong type: got 1, want true or false`},
	{"a time null", "mapslock", func(d map[string]any) { results(d)["hold_ms"] = nil }, report.ErrType,
		"results[0].hold_ms: wrong type: got null, want a number of 0 or more"},
	{"no machine", "mapslock", func(d map[string]any) { delete(d, "machine") }, report.ErrMissing,
		"machine: missing: want an object"},
	{"no params", "mapslock", func(d map[string]any) { d["params"] = nil }, report.ErrMissing,
		"params: missing: want an object"},
	{"a result without its time", "mapslock", func(d map[string]any) { delete(results(d), "hold_ms") }, report.ErrMissing,
		"results[0].hold_ms: missing: want a number of 0 or more"},
	{"a result without its target", "mapslock", func(d map[string]any) { delete(results(d), "target") }, report.ErrMissing,
		"results[0].target: missing: want a string"},
	{"half the model's figures", "forkstall", func(d map[string]any) { delete(results(d), "passes_runs") }, report.ErrMissing,
		"results[0].passes_runs: missing: want a list"},
	{"a negative time", "mapslock", func(d map[string]any) { results(d)["hold_ms"] = -0.005 }, report.ErrDomain,
		"results[0].hold_ms: out of its domain: got -0.005, want a number of 0 or more"},
	{"a negative time in a list", "mapslock", func(d map[string]any) { results(d)["hold_ms_runs"] = []any{1, -2} }, report.ErrDomain,
		"results[0].hold_ms_runs[1]: out of its domain: got -2, want a number of 0 or more"},
	{"a difference a string", "redzone", func(d map[string]any) { results(d)["hit_ns"] = "-2" }, report.ErrType,
		`results[0].hit_ns: wrong type: got "-2", want a number`},
	{"a negative duration param", "mapscan", func(d map[string]any) { params(d)["duration_ms"] = -5 }, report.ErrDomain,
		"params.duration_ms: out of its domain: got -5, want a number of 0 or more"},
	{"a negative time in a map", "mapscan", func(d map[string]any) { results(d)["slowest_wait_us"] = map[string]any{"mmap_lock": -1} }, report.ErrDomain,
		"results[0].slowest_wait_us.mmap_lock: out of its domain: got -1, want a number of 0 or more"},
	{"runs 2.5", "mapslock", func(d map[string]any) { params(d)["runs"] = 2.5 }, report.ErrDomain,
		"params.runs: out of its domain: got 2.5, want a whole number of 0 or more"},
	{"runs -1", "mapslock", func(d map[string]any) { params(d)["runs"] = -1 }, report.ErrDomain,
		"params.runs: out of its domain: got -1, want a whole number of 0 or more"},
	{"a negative size", "mapslock", func(d map[string]any) { params(d)["size_bytes"] = -4096 }, report.ErrDomain,
		"params.size_bytes: out of its domain: got -4096, want a whole number of 0 or more"},
	{"a count of a list 1.5", "mapscan", func(d map[string]any) { results(d)["ops_runs"] = []any{1.5} }, report.ErrDomain,
		"results[0].ops_runs[0]: out of its domain: got 1.5, want a whole number of 0 or more"},
	{"forks 2.5", "forkstall", func(d map[string]any) { results(d)["forks"] = 2.5 }, report.ErrDomain,
		"results[0].forks: out of its domain: got 2.5, want a whole number of 0 or more"},
	{"an unknown preemption", "mapscan", func(d map[string]any) { params(d)["preempt"] = "sometimes" }, report.ErrDomain,
		`params.preempt: out of its domain: got "sometimes": unknown preemption model "sometimes": want none or full`},
	{"a key in another case", "mapslock", func(d map[string]any) { params(d)["RUNS"] = -1 }, report.ErrType,
		`params.RUNS: wrong type: got the key "RUNS", want "runs"`},
	{"a search without its schedules", "explore", func(d map[string]any) { delete(params(d), "schedules") }, report.ErrMissing,
		"params.schedules: missing: want a whole number of 0 or more"},
}

// Each bad document is refused with its message, which names the file;
// the good documents beside it are read.
func TestLoadRefuses(t *testing.T) {
	good := t.TempDir()
	goodDocs(t, good)
	for _, c := range badDocs {
		dir := t.TempDir()
		goodDocs(t, dir)
		path := filepath.Join(dir, c.exp+".json")
		if err := os.WriteFile(path, edited(t, good, c.exp, c.edit), 0o644); err != nil {
			t.Fatal(err)
		}
		sets, bad, err := Load(All(), []string{dir})
		if err != nil || len(bad) != 1 {
			t.Errorf("%s: err %v, refused %v; want one refused", c.name, err, bad)
			continue
		}
		if want := path + ": " + c.msg; bad[0].Error() != want || !errors.Is(bad[0], c.is) {
			t.Errorf("%s: refused with\n\t%v\nwant\n\t%s (errors.Is %v)", c.name, bad[0], want, c.is)
		}
		if len(sets) != 1 || len(sets[0].Docs) != 4 || sets[0].Docs[c.exp] != nil {
			t.Errorf("%s: read %d sets, want one of the 4 good documents", c.name, len(sets))
		}
	}
}

// The good documents are read, and so are the older versions: 1 (no
// schema_version) and 2 (no model_machine, no machine.features).
func TestLoadReads(t *testing.T) {
	dir := t.TempDir()
	goodDocs(t, dir)
	check := func(what string) {
		t.Helper()
		sets, bad, err := Load(All(), []string{dir})
		if err != nil || len(bad) > 0 || len(sets) != 1 || len(sets[0].Docs) != 5 {
			t.Fatalf("%s: %d sets, err %v, refused %v", what, len(sets), err, bad)
		}
		if p := Page(All(), sets); !strings.Contains(p.Seeds[1].Verdict, "does not wait for mmap_lock") {
			t.Errorf("%s: seed 003's verdict %q", what, p.Seeds[1].Verdict)
		}
	}
	check("version 3")
	for _, version := range []int{2, 1} {
		for _, exp := range []string{"mapslock", "forkstall", "mapscan", "redzone", "explore"} {
			b := edited(t, dir, exp, func(d map[string]any) {
				delete(d, "model_machine")
				delete(d["machine"].(map[string]any), "features")
				d["schema_version"] = version
				if version == 1 {
					delete(d, "schema_version")
				}
			})
			if err := os.WriteFile(filepath.Join(dir, exp+".json"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		check("version " + string(rune('0'+version)))
	}
}

// FuzzLoad gives the loader of mmlab report (Load's, for each file) one
// document: it is read or refused with an error of one of the documented
// kinds, never a panic; a document read builds its page, which renders.
func FuzzLoad(f *testing.F) {
	good := f.TempDir()
	goodDocs(f, good)
	for _, exp := range []string{"mapslock", "forkstall", "mapscan", "redzone", "explore"} {
		f.Add(edited(f, good, exp, func(map[string]any) {}))
	}
	for _, c := range badDocs {
		f.Add(edited(f, good, c.exp, c.edit))
	}
	all := All()
	kinds := []error{report.ErrNotDocument, report.ErrNewerSchema, report.ErrUnknownExperiment, report.ErrType, report.ErrMissing, report.ErrDomain}
	f.Fuzz(func(t *testing.T, b []byte) {
		l := newLoader(all)
		if err := l.add("doc.json", b); err != nil {
			if len(l.sets) != 0 || !slices.ContainsFunc(kinds, func(k error) bool { return errors.Is(err, k) }) {
				t.Fatalf("refused with %v, of no documented kind, and %d sets", err, len(l.sets))
			}
			return
		}
		if len(l.sets) != 1 {
			t.Fatalf("one document read into %d sets", len(l.sets))
		}
		if err := report.WriteHTML(io.Discard, Page(all, l.sets)); err != nil {
			t.Fatalf("a document read does not render: %v", err)
		}
	})
}
