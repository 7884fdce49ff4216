package seeds

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"mmlab/cpu"
	"mmlab/experiment"
	"mmlab/experiment/explorer"
	"mmlab/experiment/forkstall"
	"mmlab/experiment/redzone"
	"mmlab/report"
)

func seed000() *Seed {
	return &Seed{
		ID:      "000",
		Steps:   []Step{step(forkstall.Def), step(redzone.Def), exploreStep()},
		section: section000,
	}
}

var forkCaseTitles = map[string]string{
	forkstall.CaseBusyMaps:  "the busy process maps the file",
	forkstall.CaseBusyForks: "it forks and doesn't map the file",
	forkstall.CaseIdle1000:  "nobody keeps mmap_lock busy, 1000 processes",
	forkstall.CaseIdle5000:  "nobody keeps mmap_lock busy, 5000 processes",
}

var forkModeTitles = map[string]string{
	forkstall.ModeMulti1: "uprobe_multi, 1 uprobe",
	forkstall.ModeMulti4: "uprobe_multi, 4 uprobes",
	forkstall.ModePerf4:  "perf_event, 4 uprobes",
}

// exploreStep is the explorer's step, whose documents are also those of
// `mmlab explore --json`: their params are the experiment's options, or a
// search's ("scenario") or a replay's ("replay"), told by those keys.
func exploreStep() Step {
	st := step(explorer.Def)
	st.read = func(b []byte) error {
		var head struct {
			Params map[string]json.RawMessage `json:"params"`
		}
		json.Unmarshal(b, &head) // a document that does not decode is refused by read
		switch {
		case head.Params["replay"] != nil:
			return read[explorer.ReplayParams, explorer.Result](b)
		case head.Params["scenario"] != nil:
			return read[explorer.SearchParams, explorer.Result](b)
		}
		return read[*explorer.Options, explorer.Result](b)
	}
	return st
}

// explorePart is the explorer's table: each seed-000 scenario's schedules
// in both designs, and the property that failed, if one did.
func explorePart(doc *report.Document[explorer.Options, explorer.Result]) (report.Part, string) {
	part := report.Part{Experiment: "explore", Title: "Interleavings searched on the deterministic scheduler (mmlab explore)"}
	t := report.Table{Columns: []string{"scenario", "design", "schedules", "property failed", "shrunk steps"}}
	var before, after, nb, na int
	for _, r := range doc.Results {
		p, steps := "none", "-"
		if r.Failures > 0 {
			p, steps = r.Property, fmt.Sprint(r.ShrunkSteps)
		}
		t.Rows = append(t.Rows, []string{r.Scenario, r.Variant, fmt.Sprint(r.Schedules), p, steps})
		if r.Variant == "after" {
			na++
			after += r.Failures
		} else {
			nb++
			before += r.Failures
		}
	}
	part.Tables = append(part.Tables, t)
	return part, fmt.Sprintf("the explorer finds a failing kernel property in %d of %d scenarios before the patches, %d of %d after", before, nb, after, na)
}

// section000 is the fork-stall part and its verdict, then the red-zone
// part, whose live verdict is added to the line.
func section000(s *Seed, docs Docs) report.Seed {
	sec := forkstallSection(s, docs)
	if doc, line := addPart(&sec, docs, SimKey("forkstall"), s.simForkstallPart); doc != nil && line != "" {
		sec.Verdict += "; " + line
	}
	if doc, line := addPart(&sec, docs, "redzone", redzonePart); doc != nil {
		sec.Verdict += "; " + line
	}
	if doc, line := addPart(&sec, docs, "explore", explorePart); doc != nil {
		sec.Verdict += "; " + line
	}
	return sec
}

// redzonePart is the red-zone table (designs x rate x corrupted calls x
// mask, model and live) and the line on this kernel.
func redzonePart(doc *report.Document[redzone.Options, redzone.Result]) (report.Part, string) {
	part := report.Part{Experiment: "redzone", Title: "an optimized uprobe and the probed function's red zone (-8..-64(%rsp))"}
	t := report.Table{
		Title: fmt.Sprintf("a leaf keeps %d words below %%rsp across a probed nop5, every call checked; rates per CPU-second, mean ± sd of %v samples of %v calls; ratios to the int3 baseline (model: off; live: a probe on a one-byte nop)",
			cpu.RedZoneSlots, doc.Params.Samples, doc.Params.Calls),
		Columns: []string{"target", "design", "attach", "M hits/s", "vs int3", "ns per hit", "calls", "corrupted calls", "mask", "words changed"},
	}
	for _, r := range doc.Results {
		ratio := "-"
		if r.VsInt3 != nil {
			ratio = fmt.Sprintf("%.2f ± %.2f", r.Ratio, r.RatioStddev)
		}
		ns := "-"
		if r.HitNs != 0 {
			ns = fmt.Sprintf("%.0f ± %.0f", r.HitNs, r.HitNsStddev)
		}
		t.Rows = append(t.Rows, []string{string(r.Target), r.Design(), r.Attach, fmt.Sprintf("%.3f ± %.3f", r.Mops, r.MopsStddev), ratio, ns,
			strconv.FormatUint(r.Calls, 10), strconv.FormatUint(r.Corrupted, 10), fmt.Sprintf("%#x", r.Mask), redzone.Slots(r.Mask)})
	}
	part.Tables = append(part.Tables, t)
	part.Notes = append(part.Notes, "the model's interpreter executes the trampoline's (or slot's) instructions and the uprobe syscall, while an int3 costs it one Go call: its optimized designs are slower than int3, a real CPU's are faster")
	line, _, found := redzone.Judge(doc.Results)
	if !found {
		line = "the red-zone check did not run live"
		if len(doc.Skipped) > 0 {
			line += ": " + strings.Join(doc.Skipped, "; ")
		}
	}
	return part, line
}

func forkstallSection(s *Seed, docs Docs) report.Seed {
	sec := report.Seed{ID: s.ID, Title: s.Published.Title, Summary: s.Published.Summary, Source: s.Published.Source}
	var doc report.Document[forkstall.Options, forkstall.Result]
	if !decode(docs, "forkstall", &doc) {
		sec.Verdict = "seed 000: forkstall did not run"
		return sec
	}
	find := func(target experiment.Target, variant, c, m string) (forkstall.Result, bool) {
		i := slices.IndexFunc(doc.Results, func(r forkstall.Result) bool {
			return r.Target == target && r.Variant == variant && r.Case == c && r.Mode == m
		})
		if i < 0 {
			return forkstall.Result{}, false
		}
		return doc.Results[i], true
	}
	pubOf := func(c, m string) (PubFork, bool) {
		i := slices.IndexFunc(s.Published.Forkstall, func(p PubFork) bool { return p.Case == c && p.Mode == m })
		if i < 0 {
			return PubFork{}, false
		}
		return s.Published.Forkstall[i], true
	}
	// The rows: every case and mode that ran, in the seed's order.
	type key struct{ c, m string }
	var rows []key
	for _, c := range forkstall.Cases {
		for _, m := range forkstall.Modes {
			if slices.ContainsFunc(doc.Results, func(r forkstall.Result) bool { return r.Case == c && r.Mode == m }) {
				rows = append(rows, key{c, m})
			}
		}
	}
	t := report.Table{
		Title: fmt.Sprintf("longest fork() during uprobe attach/detach, ms. published: %s; model: each populate holds mmap_lock %.0f ms, each attach starts with one, median of %v runs; live: %s",
			s.Published.Setting, doc.Params.ModelPopulateHoldMs, doc.Params.Runs, settingLine(doc.Machine, fmt.Sprintf("%s busy region", doc.Params.Size))),
		Columns: []string{"case", "published before", "published after", "model before", "model after", "live kernel", "live quiet"},
	}
	att := report.Table{Title: "time to attach, ms (same settings)",
		Columns: []string{"case", "published before", "published after", "model before", "model after", "live kernel"}}
	var cats []string
	series := map[string]*report.Series{}
	names := []string{"model before", "model after", "live kernel"}
	for _, n := range names {
		series[n] = &report.Series{Name: n}
	}
	var quiet []float64
	for i, k := range rows {
		label := forkCaseTitles[k.c] + ": " + forkModeTitles[k.m]
		cats = append(cats, label)
		p, okp := pubOf(k.c, k.m)
		mb, okb := find(experiment.Model, "before", k.c, k.m)
		ma, oka := find(experiment.Model, "after", k.c, k.m)
		lv, okl := find(experiment.Live, experiment.VariantKernel, k.c, k.m)
		t.Rows = append(t.Rows, []string{label,
			ms(p.ForkBeforeMs, okp), ms(p.ForkAfterMs, okp), ms(mb.ForkMaxMs, okb), ms(ma.ForkMaxMs, oka), ms(lv.ForkMaxMs, okl), ms(lv.BaselineMs, okl)})
		att.Rows = append(att.Rows, []string{label,
			ms(p.AttachBeforeMs, okp), ms(p.AttachAfterMs, okp), ms(mb.AttachMs, okb), ms(ma.AttachMs, oka), ms(lv.AttachMs, okl)})
		for _, x := range []struct {
			name string
			r    forkstall.Result
			ok   bool
		}{{"model before", mb, okb}, {"model after", ma, oka}, {"live kernel", lv, okl}} {
			if !x.ok {
				continue
			}
			for _, y := range x.r.ForkMaxMsRuns {
				series[x.name].Points = append(series[x.name].Points, report.Point{X: float64(i), Y: y})
			}
		}
		if okl {
			quiet = append(quiet, lv.BaselineMsRuns...)
		}
	}
	part := report.Part{Experiment: "forkstall", Title: "fork() while uprobes attach to a busy process", Tables: []report.Table{t, att}}
	ch := report.Chart{Title: "longest fork() in each attach/detach window, every run", Kind: report.Dots,
		XLabel: "case", YLabel: "longest fork() (ms)", LogY: true, Categories: cats,
		Command: "mmlab run forkstall " + strings.Join(experiment.Args(&doc.Params, forkstall.Def.NewOptions()), " ")}
	for _, n := range names {
		ch.Series = append(ch.Series, *series[n])
	}
	if len(quiet) > 0 {
		ch.Refs = append(ch.Refs, report.Ref{Label: "live quiet baseline (median)", Y: report.Median(quiet)})
	}
	part.Charts = append(part.Charts, ch)
	sec.Parts = append(sec.Parts, part)

	// The verdict: the live busy case with the longest fork, and the
	// model's before and after of the same case.
	var worst forkstall.Result
	found := false
	for _, r := range doc.Results {
		if r.Target == experiment.Live && (!found || r.ForkMaxMs > worst.ForkMaxMs) {
			worst, found = r, true
		}
	}
	model := ""
	if len(rows) > 0 {
		k := rows[0]
		mb, okb := find(experiment.Model, "before", k.c, k.m)
		ma, oka := find(experiment.Model, "after", k.c, k.m)
		if okb && oka {
			model = fmt.Sprintf("; the model reproduces %s -> %s ms (%s)", ms(mb.ForkMaxMs, true), ms(ma.ForkMaxMs, true), k.c+" "+k.m)
		}
	}
	switch {
	case !found:
		reason := "did not run"
		if len(doc.Skipped) > 0 {
			reason = "was skipped: " + strings.Join(doc.Skipped, "; ")
		}
		sec.Verdict = "seed 000: the live part " + reason + model
	case forkstall.Judge(worst.ForkMaxMs, worst.BaselineMs) == "stalls":
		sec.Verdict = fmt.Sprintf("seed 000: this kernel stalls fork() %s ms during a uprobe attach (%s ms quiet): it lacks the fix%s",
			ms(worst.ForkMaxMs, true), ms(worst.BaselineMs, true), model)
		sec.Headline = fmt.Sprintf("stalls fork() %s ms (%s ms quiet)", ms(worst.ForkMaxMs, true), ms(worst.BaselineMs, true))
	default:
		sec.Verdict = fmt.Sprintf("seed 000: this kernel does not stall fork() during a uprobe attach: longest %s ms against %s ms quiet%s",
			ms(worst.ForkMaxMs, true), ms(worst.BaselineMs, true), model)
		sec.Headline = fmt.Sprintf("no stall: fork() %s ms (%s ms quiet)", ms(worst.ForkMaxMs, true), ms(worst.BaselineMs, true))
	}
	return sec
}

// simForkstallPart is seed 000's table on its machine (the sim step): the
// longest fork and the attach time before and after in each of the seed's
// rows, published beside the simulated VM's, and the verdict clause
// (simVerdict000).
func (s *Seed) simForkstallPart(doc *report.Document[forkstall.Options, forkstall.Result]) (report.Part, string) {
	_, mach := simMachine(doc.ModelMachine)
	part := report.Part{Experiment: "forkstall", Title: "Seed 000's table on its machine (" + mach + "): longest fork() and attach time, ms"}
	t := report.Table{
		Title: fmt.Sprintf("ms. published: %s; %s: %s busy region, the median of %d runs, virtual time", s.Published.Setting, mach, doc.Params.Size, doc.Params.Runs),
		Columns: []string{"case", "mode", "published fork before", "published fork after", mach + " fork before", mach + " fork after",
			"published attach before", "published attach after", mach + " attach before", mach + " attach after"},
	}
	rows := simForkRows(s.Published.Forkstall, doc.Results)
	for _, r := range rows {
		t.Rows = append(t.Rows, []string{forkCaseTitles[r.pub.Case], forkModeTitles[r.pub.Mode],
			ms(r.pub.ForkBeforeMs, true), ms(r.pub.ForkAfterMs, true), ms(r.before.ForkMaxMs, r.ok), ms(r.after.ForkMaxMs, r.ok),
			ms(r.pub.AttachBeforeMs, true), ms(r.pub.AttachAfterMs, true), ms(r.before.AttachMs, r.ok), ms(r.after.AttachMs, r.ok)})
	}
	part.Tables = append(part.Tables, t)
	return part, simVerdict000(mach, rows)
}

// simForkRow is one published row of seed 000's table with the sim's
// before and after results of its case and mode (ok when both exist).
type simForkRow struct {
	pub           PubFork
	before, after forkstall.Result
	ok            bool
}

func simForkRows(pub []PubFork, rs []forkstall.Result) []simForkRow {
	find := func(variant, c, mode string) (forkstall.Result, bool) {
		i := slices.IndexFunc(rs, func(r forkstall.Result) bool {
			return r.Target == experiment.Sim && r.Variant == variant && r.Case == c && r.Mode == mode
		})
		if i < 0 {
			return forkstall.Result{}, false
		}
		return rs[i], true
	}
	var rows []simForkRow
	for _, p := range pub {
		b, okb := find("before", p.Case, p.Mode)
		a, oka := find("after", p.Case, p.Mode)
		rows = append(rows, simForkRow{p, b, a, okb && oka})
	}
	return rows
}

// simVerdict000 is the clause that says whether the simulated VM
// reproduces seed 000's table, by these tests: in the six busy rows
// the longest fork before within 2x of the seed's and after at most 1 ms,
// the attach time after/before between 0.9 and 1.2 where the busy process
// maps the file and below 0.1 where it forks; in the two idle rows the
// fork after within 2x of the seed's and after/before between 0.8 and 1.1.
func simVerdict000(mach string, rows []simForkRow) string {
	type test struct {
		name      string
		pass, all int
	}
	tests := []*test{{name: "fork before within 2x"}, {name: "fork after <= 1 ms"}, {name: "attach after/before as the seed's"},
		{name: "idle fork after within 2x"}, {name: "idle fork after/before 0.8-1.1"}}
	check := func(t *test, ok bool) {
		t.all++
		if ok {
			t.pass++
		}
	}
	within2 := func(x, p float64) bool { return x <= 2*p && x >= p/2 }
	for _, r := range rows {
		if !r.ok {
			continue
		}
		b, a := r.before, r.after
		switch r.pub.Case {
		case forkstall.CaseBusyMaps, forkstall.CaseBusyForks:
			check(tests[0], within2(b.ForkMaxMs, r.pub.ForkBeforeMs))
			check(tests[1], a.ForkMaxMs <= 1)
			ratio := a.AttachMs / b.AttachMs
			if r.pub.Case == forkstall.CaseBusyMaps {
				check(tests[2], ratio >= 0.9 && ratio <= 1.2)
			} else {
				check(tests[2], ratio < 0.1)
			}
		default:
			check(tests[3], within2(a.ForkMaxMs, r.pub.ForkAfterMs))
			ratio := a.ForkMaxMs / b.ForkMaxMs
			check(tests[4], ratio >= 0.8 && ratio <= 1.1)
		}
	}
	var parts []string
	pass, all := 0, 0
	for _, t := range tests {
		if t.all > 0 {
			parts = append(parts, fmt.Sprintf("%s in %d of %d rows", t.name, t.pass, t.all))
			pass, all = pass+t.pass, all+t.all
		}
	}
	if all == 0 {
		return ""
	}
	verdict := "does not reproduce the seed"
	if pass == all {
		verdict = "reproduces the seed"
	}
	return fmt.Sprintf("%s %s: %s", mach, verdict, strings.Join(parts, ", "))
}
