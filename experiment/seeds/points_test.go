package seeds

import (
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"mmlab/experiment"
	"mmlab/experiment/mapslock"
	"mmlab/machine"
	"mmlab/report"
)

// savePoint writes, in dir/sim, a sim mapslock document of host node-a
// holding point index of of, with one result per case of cases.
func savePoint(t *testing.T, dir string, point *report.SweepPoint, runs int, cases ...string) {
	t.Helper()
	doc := report.NewDocument[*mapslock.Options, mapslock.Result]("mapslock", machine.MustNamed("x86-64"), &mapslock.Options{Runs: runs, Size: 1 << 20, Cases: cases})
	doc.Machine = report.Machine{Hostname: "node-a", Kernel: "linux 6.18.44", CPUs: 4}
	doc.Point = point
	doc.Verdict = "verdict: of one point"
	for _, c := range cases {
		doc.Results = append(doc.Results, mapslock.Result{Row: experiment.Row{Target: experiment.Sim, Variant: "after"}, Case: c, HoldMs: 1, Probed: runs})
	}
	if err := doc.Save(filepath.Join(dir, SimDir)); err != nil {
		t.Fatal(err)
	}
}

// A directory's sim/ documents are read beside its own, under SimKey.
func TestLoadReadsSim(t *testing.T) {
	dir := t.TempDir()
	saveLock(t, dir, "node-a", "linux 6.18.44", 1, 0)
	savePoint(t, dir, nil, 4, mapslock.CaseOther)
	for _, read := range []func() (Docs, error){
		func() (Docs, error) { return ReadDocs(dir) },
		func() (Docs, error) {
			sets, bad, err := Load(All(), []string{dir})
			if err != nil || len(bad) > 0 || len(sets) != 1 {
				t.Fatalf("Load: %d sets, %v, %v", len(sets), err, bad)
			}
			return sets[0].Docs, nil
		},
	} {
		docs, err := read()
		if err != nil {
			t.Fatal(err)
		}
		if len(docs) != 2 || docs["mapslock"] == nil || docs[SimKey("mapslock")] == nil {
			t.Errorf("docs %q, want mapslock and sim/mapslock", slices.Sorted(maps.Keys(docs)))
		}
	}
	// A sim document given as a file is keyed as in its directory.
	sets, bad, err := Load(All(), []string{filepath.Join(dir, SimDir, "mapslock.json")})
	if err != nil || len(bad) > 0 || len(sets) != 1 || sets[0].Docs[SimKey("mapslock")] == nil {
		t.Errorf("sim/mapslock.json alone: %v, %v", err, bad)
	}
}

// The points of one sweep from several directories merge into one
// document, its results in point order and its lists the union of the
// points'; a second document of a point, a point beside a document that
// is none, and points that disagree are refused.
func TestLoadMergesPoints(t *testing.T) {
	p0, p1, p2 := t.TempDir(), t.TempDir(), t.TempDir()
	savePoint(t, p0, &report.SweepPoint{Index: 0, Of: 3}, 4, mapslock.CaseOther)
	savePoint(t, p1, &report.SweepPoint{Index: 1, Of: 3}, 4, mapslock.CaseSame)
	savePoint(t, p2, &report.SweepPoint{Index: 2, Of: 3}, 4, mapslock.CaseOther)
	sets, bad, err := Load(All(), []string{p2, p0, p1})
	if err != nil || len(bad) > 0 || len(sets) != 1 {
		t.Fatalf("%d sets, %v, %v", len(sets), err, bad)
	}
	doc, err := report.Read[*mapslock.Options, mapslock.Result](sets[0].Docs[SimKey("mapslock")])
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range doc.Results {
		got = append(got, r.Case)
	}
	if want := []string{mapslock.CaseOther, mapslock.CaseSame, mapslock.CaseOther}; !slices.Equal(got, want) {
		t.Errorf("merged results %q, want the points' in order %q", got, want)
	}
	if want := []string{mapslock.CaseOther, mapslock.CaseSame}; !slices.Equal(doc.Params.Cases, want) || doc.Params.Runs != 4 {
		t.Errorf("merged params %+v, want cases %q and runs 4", doc.Params, want)
	}
	if doc.Point != nil || doc.Verdict != "" {
		t.Errorf("merged document keeps a point's point %v or verdict %q", doc.Point, doc.Verdict)
	}
	if inc := sets[0].Incomplete(); len(inc) != 0 {
		t.Errorf("a whole sweep is incomplete: %q", inc)
	}
	sets, _, _ = Load(All(), []string{p0, p2})
	if inc := sets[0].Incomplete(); !slices.Equal(inc, []string{"sim/mapslock: points 0, 2 of 3"}) {
		t.Errorf("two points of three: %q", inc)
	}

	refused := func(what string, is error, in []string, paths ...string) {
		t.Helper()
		_, bad, err := Load(All(), paths)
		if err != nil || len(bad) != 1 || !errors.Is(bad[0], is) {
			t.Errorf("%s: err %v, refused %v; want one refusal wrapping %v", what, err, bad, is)
			return
		}
		for _, s := range in {
			if !strings.Contains(bad[0].Error(), s) {
				t.Errorf("%s: %q does not say %q", what, bad[0], s)
			}
		}
	}
	refused("a point twice", ErrDuplicate, []string{"point 0", p0}, p0, p0)
	whole := t.TempDir()
	savePoint(t, whole, nil, 4, mapslock.CaseOther)
	refused("a point beside the whole sweep", ErrDuplicate, nil, whole, p1)
	refused("the whole sweep beside a point", ErrDuplicate, nil, p1, whole)
	runs := t.TempDir()
	savePoint(t, runs, &report.SweepPoint{Index: 1, Of: 3}, 5, mapslock.CaseSame)
	refused("points of other runs", ErrMerge, []string{"params.runs", "4 in " + filepath.Join(p0, SimDir, "mapslock.json"), "5 in " + filepath.Join(runs, SimDir, "mapslock.json")}, p0, runs)
	other := t.TempDir()
	savePoint(t, other, &report.SweepPoint{Index: 1, Of: 4}, 4, mapslock.CaseSame)
	refused("points of sweeps of other sizes", ErrMerge, []string{"of 4", "of 3"}, p0, other)
	big := t.TempDir()
	savePoint(t, big, &report.SweepPoint{Index: 3, Of: 3}, 4, mapslock.CaseSame)
	refused("a point beyond its sweep", report.ErrDomain, []string{"index 3 of 3"}, big)
}

// Plan puts an experiment's sim step after its model and live step, and
// Points lists the full setting's sim points, each step's Points or its
// Full arguments as one.
func TestPlanSimSteps(t *testing.T) {
	lock := StepOf(mapslock.Def)
	lock.Sim = &experiment.SimSettings{Machine: "x86-64", Quick: []string{"--runs", "2"}, Full: []string{"--runs", "9"},
		Smoke: []string{"--runs", "1"}, EstQuick: time.Minute, EstFull: time.Hour}
	split := lock
	split.Sim = &experiment.SimSettings{Machine: "x86-64", Full: []string{"--cases", "other,same"},
		Points: [][]string{{"--cases", "other"}, {"--cases", "same"}}, EstFull: 2 * time.Hour}
	s := &Seed{ID: "t", Steps: []Step{lock, StepOf(mapslock.Def), split}}
	plan := Plan([]*Seed{s}, Quick)
	var sims []string
	for _, p := range plan {
		if p.IsSim() {
			sims = append(sims, p.Label()+" "+strings.Join(p.RunArgs("both", "host", "D"), " "))
		}
	}
	want := []string{
		"mapslock (sim, x86-64) --runs 2 --target sim --machine x86-64 --out " + filepath.Join("D", "sim"),
		"mapslock (sim, x86-64) --target sim --machine x86-64 --out " + filepath.Join("D", "sim"),
	}
	if len(plan) != 5 || !plan[1].IsSim() || plan[0].IsSim() || !slices.Equal(sims, want) {
		t.Errorf("quick plan of %d steps, sim steps\n\t%q\nwant\n\t%q", len(plan), sims, want)
	}
	if got := strings.Join(plan[0].RunArgs("both", "host", "D"), " "); !strings.HasSuffix(got, "--target both --machine host --out D") {
		t.Errorf("model and live step args %q", got)
	}
	points := Points([]*Seed{s})
	var got []string
	for _, p := range points {
		got = append(got, strings.Join(p.RunArgs("both", "host", "D"), " ")+" ~"+p.Est.String())
	}
	sim := " --target sim --machine x86-64 --out " + filepath.Join("D", "sim")
	want = []string{
		"--runs 9" + sim + " --sweep-point 0/1 ~1h0m0s",
		"--cases other" + sim + " --sweep-point 0/2 ~1h0m0s",
		"--cases same" + sim + " --sweep-point 1/2 ~1h0m0s",
	}
	if !slices.Equal(got, want) {
		t.Errorf("points\n\t%q\nwant\n\t%q", got, want)
	}
}
