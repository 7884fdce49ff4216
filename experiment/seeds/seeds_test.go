package seeds

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mmlab/experiment"
	"mmlab/experiment/mapslock"
	"mmlab/experiment/redzone"
	"mmlab/machine"
	"mmlab/report"
)

func TestPublished(t *testing.T) {
	for _, s := range All() {
		p := s.Published
		if p.Title == "" || p.Source == "" || p.Setting == "" || p.Summary == "" {
			t.Errorf("seed %s: published data incomplete: %+v", s.ID, p)
		}
	}
	all := All()
	if len(all[0].Published.Forkstall) != 8 || all[1].Published.Mapscan == nil || len(all[2].Published.Trigger) != 14 {
		t.Error("published figures missing")
	}
	if f := all[0].Published.Forkstall[0]; f.Case != "busy-maps" || f.ForkBeforeMs != 201 || f.AttachAfterMs != 232 {
		t.Errorf("first row of seed 000: %+v", f)
	}
}

// saveLock writes a mapslock document of host with the given share of
// runs in which a query of the unrelated VMA returned during the hold.
func saveLock(t testing.TB, dir, host, kernel string, other, same float64) {
	doc := report.NewDocument[*mapslock.Options, mapslock.Result]("mapslock", machine.MustNamed("x86-64"), &mapslock.Options{Runs: 4, Size: 1 << 30})
	doc.Machine = report.Machine{Hostname: host, Kernel: kernel, CPUs: 4}
	for _, c := range []struct {
		name  string
		first float64
	}{{mapslock.CaseOther, other}, {mapslock.CaseSame, same}} {
		doc.Results = append(doc.Results, mapslock.Result{Row: experiment.LiveRow,
			Case: c.name, HoldMs: 20, QueryMs: 0.001, First: c.first, Probed: 4, HoldMsRuns: make([]float64, 4)})
	}
	if err := doc.Save(dir); err != nil {
		t.Fatal(err)
	}
}

func TestReportComparesHosts(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	saveLock(t, a, "node-a", "linux 6.18.44", 1, 0)
	saveLock(t, b, "node-b", "linux 6.12.1", 0, 0)
	sets, bad, err := Load(All(), []string{a, filepath.Join(b, "mapslock.json")})
	if err != nil || len(bad) > 0 {
		t.Fatal(err, bad)
	}
	p := Page(All(), sets)
	if p.Comparison == nil || len(p.Comparison.Rows) != 2 || len(p.Hosts) != 2 {
		t.Fatalf("comparison %+v, hosts %d", p.Comparison, len(p.Hosts))
	}
	rowA, rowB := p.Comparison.Rows[0], p.Comparison.Rows[1]
	col := 3 + 1 // host, kernel, CPUs, then seeds 000, 003, 004
	if rowA[0] != "node-a" || rowA[1] != "linux 6.18.44" || !strings.Contains(rowA[col], "without mmap_lock") {
		t.Errorf("row of node-a: %q", rowA)
	}
	if rowB[0] != "node-b" || !strings.Contains(rowB[col], "waits for mmap_lock") || strings.Contains(rowB[col], "without") {
		t.Errorf("row of node-b: %q", rowB)
	}
	// One host: no comparison.
	if p := Page(All(), sets[:1]); p.Comparison != nil || len(p.Seeds) != 3 {
		t.Errorf("one host: comparison %v, %d seeds", p.Comparison, len(p.Seeds))
	}
	// The same experiment twice for one host is an error, and so is a
	// file that is not a result.
	if _, bad, _ := Load(All(), []string{a, a}); len(bad) != 1 || !errors.Is(bad[0], ErrDuplicate) {
		t.Error("a host's document given twice was accepted")
	}
	junk := filepath.Join(t.TempDir(), "x.json")
	os.WriteFile(junk, []byte(`{"a":1}`), 0o644)
	if _, bad, _ := Load(All(), []string{junk}); len(bad) != 1 || !errors.Is(bad[0], report.ErrNotDocument) {
		t.Error("a JSON file that is no result was accepted")
	}
}

// mmlab report reads documents of version 2, which have no machine
// description (no model_machine, no machine.features): the host's
// section and its verdict are built as from version 3.
func TestReportReadsVersion2(t *testing.T) {
	dir := t.TempDir()
	saveLock(t, dir, "node-a", "linux 6.18.44", 1, 0)
	path := filepath.Join(dir, "mapslock.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	doc["schema_version"] = 2
	delete(doc, "model_machine")
	delete(doc["machine"].(map[string]any), "features")
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, b, 0o644)
	sets, bad, err := Load(All(), []string{dir})
	if err != nil || len(bad) > 0 {
		t.Fatal(err, bad)
	}
	p := Page(All(), sets)
	if len(sets) != 1 || sets[0].Host.Machine.Features != nil || len(p.Seeds) != 3 || !strings.Contains(p.Seeds[1].Verdict, "does not wait for mmap_lock") {
		t.Fatalf("version 2: sets %+v, seed 003's verdict %q", sets, p.Seeds[1].Verdict)
	}
	if m := sets[0].Host.Model; m != "host (features not recorded: schema 2)" {
		t.Errorf("version 2: model machine %q, want the host with its features not recorded", m)
	}
	// A version-3 document of the same host adds its model machine.
	rz := report.NewDocument[*redzone.Options, redzone.Result]("redzone", machine.MustNamed("x86-64-pku"), redzone.NewOptions())
	rz.Machine = sets[0].Host.Machine
	if err := rz.Save(dir); err != nil {
		t.Fatal(err)
	}
	if sets, bad, err = Load(All(), []string{dir}); err != nil || len(bad) > 0 || len(sets) != 1 {
		t.Fatalf("%d sets, %v, %v", len(sets), err, bad)
	}
	// In the order of the files: mapslock.json, then redzone.json.
	want := "host (features not recorded: schema 2); x86-64-pku: ospke, mmap_min_addr 65536, CAP_SYS_RAWIO"
	if m := sets[0].Host.Model; m != want {
		t.Errorf("model machines %q, want %q", m, want)
	}
}
