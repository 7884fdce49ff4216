package seeds

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"mmlab/experiment"
	"mmlab/experiment/mapscan"
	"mmlab/experiment/mapslock"
	"mmlab/experiment/maptear"
	"mmlab/report"
)

func seed003() *Seed {
	return &Seed{
		ID:      "003",
		Steps:   []Step{step(mapslock.Def), step(mapscan.Def), step(maptear.Def)},
		section: section003,
	}
}

// column names the three kinds of columns of a seed table.
func column(target experiment.Target, variant string) string {
	if target == experiment.Live {
		return "live kernel"
	}
	return "model " + variant
}

func section003(s *Seed, docs Docs) report.Seed {
	sec := report.Seed{ID: s.ID, Title: s.Published.Title, Summary: s.Published.Summary, Source: s.Published.Source}
	var lines []string

	var lock report.Document[mapslock.Options, mapslock.Result]
	if decode(docs, "mapslock", &lock) {
		part := report.Part{Experiment: "mapslock", Title: "Does PROCMAP_QUERY wait for mmap_lock? (the discriminating probe)"}
		t := report.Table{
			Title:   fmt.Sprintf("PROCMAP_QUERY during mprotect(%s) of a populated region, median of %v runs", lock.Params.Size, lock.Params.Runs),
			Columns: []string{"target", "case", "mprotect ms", "query ms", "returned during mprotect"},
		}
		for _, r := range lock.Results {
			t.Rows = append(t.Rows, []string{column(r.Target, r.Variant), r.Case, ms(r.HoldMs, true), ms(r.QueryMs, true),
				fmt.Sprintf("%.0f%% of %d", 100*r.First, r.Probed)})
		}
		part.Tables = append(part.Tables, t)
		sec.Parts = append(sec.Parts, part)
		if l := mapslock.Line(lock.Results, experiment.Live, experiment.VariantKernel); l != "" {
			lines = append(lines, strings.TrimPrefix(l, "live kernel: "))
			other, _ := findLock(lock.Results, mapslock.CaseOther)
			same, _ := findLock(lock.Results, mapslock.CaseSame)
			switch mapslock.Judge(other, same) {
			case mapslock.VerdictPerVMA:
				sec.Headline = "PROCMAP_QUERY without mmap_lock"
			case mapslock.VerdictMmapLock:
				sec.Headline = "PROCMAP_QUERY waits for mmap_lock"
			default:
				sec.Headline = "PROCMAP_QUERY probe inconclusive"
			}
		}
		lines = append(lines, skipped("mapslock", lock.Skipped)...)
	}

	if scan, line := addPart(&sec, docs, "mapscan", s.mapscanPart); scan != nil {
		if line != "" {
			lines = append(lines, line)
			if sec.Headline != "" {
				sec.Headline += "; " + line
			}
		}
		lines = append(lines, skipped("mapscan", scan.Skipped)...)
	}
	if sim, line := addPart(&sec, docs, SimKey("mapscan"), s.simMapscanPart); sim != nil && line != "" {
		lines = append(lines, line)
	}

	var tear report.Document[maptear.Options, maptear.Result]
	if decode(docs, "maptear", &tear) {
		part := report.Part{Experiment: "maptear", Title: "Tearing: a VMA may be seen twice, never a gap (proc-maps-race.c)"}
		t := report.Table{Columns: []string{"target", "case", "reads", "modified", "duplicates", "gaps", "unexpected", "query gaps", "query wrong"}}
		reads, gaps := 0, 0
		for _, r := range tear.Results {
			t.Rows = append(t.Rows, []string{column(r.Target, r.Variant), r.Case, fmt.Sprint(r.Reads), fmt.Sprint(r.Modified),
				fmt.Sprint(r.Duplicates), fmt.Sprint(r.Gaps), fmt.Sprint(r.Unexpected), fmt.Sprint(r.QueryGaps), fmt.Sprint(r.QueryWrong)})
			if r.Target == experiment.Live && !maptear.IsGap(r.Case) {
				reads += r.Reads
				gaps += r.Gaps + r.Unexpected + r.QueryGaps + r.QueryWrong
			}
		}
		part.Tables = append(part.Tables, t)
		if tear.Verdict != "" {
			part.Notes = append(part.Notes, tear.Verdict)
		}
		sec.Parts = append(sec.Parts, part)
		if reads > 0 {
			lines = append(lines, fmt.Sprintf("tearing: %d gaps or wrong lines in %d live reads", gaps, reads))
		}
		if l := maptear.GapLine(tear.Results, experiment.Live); l != "" {
			lines = append(lines, l)
		}
		lines = append(lines, skipped("maptear", tear.Skipped)...)
	}
	if len(lines) == 0 {
		lines = []string{"no live result"}
	}
	sec.Verdict = "seed 003: this kernel: " + strings.Join(lines, "; ")
	return sec
}

func findLock(rs []mapslock.Result, c string) (mapslock.Result, bool) {
	i := slices.IndexFunc(rs, func(r mapslock.Result) bool { return r.Target == experiment.Live && r.Case == c })
	if i < 0 {
		return mapslock.Result{}, false
	}
	return rs[i], true
}

// skipped turns a document's skipped parts into verdict phrases.
func skipped(name string, sk []string) []string {
	var out []string
	for _, s := range sk {
		out = append(out, name+" "+s)
	}
	return out
}

// mapscanPart is seed 003's own figure: the mapper's mean and maximum
// latency with two text scanners, published against model and live, and
// the charts of every scanner case.
func (s *Seed) mapscanPart(doc *report.Document[mapscan.Options, mapscan.Result]) (report.Part, string) {
	part := report.Part{Experiment: "mapscan", Title: "mmap/munmap latency while maps scanners run (proc-mmap_sem-test)"}
	pub := s.Published.Mapscan
	find := func(target experiment.Target, variant, scanners string) (mapscan.Result, bool) {
		i := slices.IndexFunc(doc.Results, func(r mapscan.Result) bool {
			return r.Target == target && r.Variant == variant && r.Scanners == scanners && !r.Insufficient()
		})
		if i < 0 {
			return mapscan.Result{}, false
		}
		return doc.Results[i], true
	}
	runs := doc.Params.Runs
	dur := float64(doc.Params.Duration.D()) / float64(time.Millisecond)
	cols := []struct {
		target  experiment.Target
		variant string
	}{{experiment.Model, "before"}, {experiment.Model, "after"}, {experiment.Live, experiment.VariantKernel}}
	t := report.Table{
		Title: fmt.Sprintf("mapper latency, ms: published (%s) against this run (%v runs of %.0f ms per case; %s)",
			s.Published.Setting, runs, dur, settingLine(doc.Machine, "")),
		Columns: []string{"", "published before", "published after", "model before", "model after", "live kernel"},
	}
	row := func(label string, pubB, pubA string, scanners string, f func(mapscan.Result) float64) {
		r := []string{label, pubB, pubA}
		for _, c := range cols {
			x, ok := find(c.target, c.variant, scanners)
			r = append(r, ms(f(x)/1000, ok))
		}
		t.Rows = append(t.Rows, r)
	}
	rng := func(lo, hi float64) string { return fmt.Sprintf("%s-%s", ms(lo, true), ms(hi, true)) }
	row("mean, 2 text scanners", ms(pub.Before.MedianMean, true), ms(pub.After.MedianMean, true), "text", func(r mapscan.Result) float64 { return r.OpMeanUS })
	row("max, 2 text scanners", rng(pub.Before.MaxLo, pub.Before.MaxHi), rng(pub.After.MaxLo, pub.After.MaxHi), "text", func(r mapscan.Result) float64 { return r.OpMaxUS })
	row("max, 2 query scanners", "-", "-", "query", func(r mapscan.Result) float64 { return r.OpMaxUS })
	row("max, no scanner", "-", "-", "none", func(r mapscan.Result) float64 { return r.OpMaxUS })
	part.Tables = append(part.Tables, t)

	// Ratios are what compares across targets.
	b, okb := find(experiment.Model, "before", "text")
	a, oka := find(experiment.Model, "after", "text")
	if okb && oka && a.OpMaxUS > 0 && a.OpMaxMedianUS > 0 {
		part.Notes = append(part.Notes, fmt.Sprintf("model max before/after with text scanners: %.1fx, median of the per-run maxima %.1fx (published: %.1fx to %.1fx, \"close to 10x\")",
			b.OpMaxUS/a.OpMaxUS, b.OpMaxMedianUS/a.OpMaxMedianUS, pub.Before.MaxLo/pub.After.MaxLo, pub.Before.MaxHi/pub.After.MaxHi))
	}
	cats := []string{"none", "text", "query"}
	command := fmt.Sprintf("mmlab run mapscan --runs %v --duration %.0fms", runs, dur)
	for _, m := range []struct {
		title string
		f     func(mapscan.Result) float64
	}{{"mapper max latency", func(r mapscan.Result) float64 { return r.OpMaxUS }}, {"mapper mean latency", func(r mapscan.Result) float64 { return r.OpMeanUS }}} {
		ch := report.Chart{Title: m.title + " by scanners", Kind: report.Bars, XLabel: "maps scanners", YLabel: m.title + " (us)", LogY: true,
			Categories: cats, Command: command}
		for _, c := range cols {
			se := report.Series{Name: column(c.target, c.variant)}
			for i, cat := range cats {
				if x, ok := find(c.target, c.variant, cat); ok {
					se.Points = append(se.Points, report.Point{X: float64(i), Y: m.f(x)})
				}
			}
			ch.Series = append(ch.Series, se)
		}
		part.Charts = append(part.Charts, ch)
	}
	line := ""
	if w, ok1 := find(experiment.Live, experiment.VariantKernel, "text"); ok1 {
		if n, ok2 := find(experiment.Live, experiment.VariantKernel, "none"); ok2 {
			line = fmt.Sprintf("mapper max %s ms with text scanners, %s ms without", ms(w.OpMaxUS/1000, true), ms(n.OpMaxUS/1000, true))
		}
	}
	return part, line
}

// simMapscanPart is seed 003's test on its machine (the sim step):
// run-proc-vs-map.sh's --rawdata figures before and after, beside the
// cover letter's, the sorted per-sample maxima against the sample's rank
// (published: the four smallest and four largest of 100), and the verdict
// clause (simVerdict003).
func (s *Seed) simMapscanPart(doc *report.Document[mapscan.Options, mapscan.Result]) (report.Part, string) {
	name, mach := simMachine(doc.ModelMachine)
	pub := s.Published.Mapscan
	part := report.Part{Experiment: "mapscan", Title: "Seed 003's test on its machine (" + mach + "): mapper latency with two text scanners"}
	find := func(variant string) (mapscan.Result, bool) {
		i := slices.IndexFunc(doc.Results, func(r mapscan.Result) bool {
			return r.Target == experiment.Sim && r.Variant == variant && r.Scanners == "text"
		})
		if i < 0 {
			return mapscan.Result{}, false
		}
		return doc.Results[i], true
	}
	b, okb := find("before")
	a, oka := find("after")
	t := report.Table{
		Title:   fmt.Sprintf("ms. published: %s; %s: %d samples of %v", s.Published.Setting, mach, doc.Params.Runs, doc.Params.Duration),
		Columns: []string{"", "published before", "published after", mach + " before", mach + " after"},
	}
	rng := func(lo, hi float64) string { return fmt.Sprintf("%s-%s", ms(lo, true), ms(hi, true)) }
	stat := func(r mapscan.Result, ok bool, f func(mapscan.Result) string) string {
		if !ok {
			return "-"
		}
		return f(r)
	}
	rows := []struct {
		label      string
		pubB, pubA string
		f          func(mapscan.Result) string
	}{
		{"median per-sample mean", ms(pub.Before.MedianMean, true), ms(pub.After.MedianMean, true),
			func(r mapscan.Result) string { return ms(report.Median(r.OpMeanUSRuns)/1000, true) }},
		{"per-sample maxima, smallest-largest", rng(pub.Before.MaxLo, pub.Before.MaxHi), rng(pub.After.MaxLo, pub.After.MaxHi),
			func(r mapscan.Result) string {
				return rng(slices.Min(r.OpMaxUSRuns)/1000, slices.Max(r.OpMaxUSRuns)/1000)
			}},
		{"median per-sample maximum", "-", "-", func(r mapscan.Result) string { return ms(report.Median(r.OpMaxUSRuns)/1000, true) }},
		{"samples with maximum <= 0.5 ms", "-", fmt.Sprintf("%d of %d", pub.After.Samples, pub.After.Samples),
			func(r mapscan.Result) string {
				return fmt.Sprintf("%d of %d", under(r.OpMaxUSRuns, 500), len(r.OpMaxUSRuns))
			}},
	}
	for _, r := range rows {
		t.Rows = append(t.Rows, []string{r.label, r.pubB, r.pubA, stat(b, okb && len(b.OpMaxUSRuns) > 0, r.f), stat(a, oka && len(a.OpMaxUSRuns) > 0, r.f)})
	}
	part.Tables = append(part.Tables, t)
	ch := report.Chart{Title: "per-sample maximum latency, sorted: published and " + mach, Kind: report.Lines,
		XLabel: "sample's rank (fraction of the samples)", YLabel: "per-sample maximum (ms)", LogY: true,
		Command: "mmlab run mapscan --target sim --machine " + name + " " + strings.Join(experiment.Args(&doc.Params, mapscan.NewOptions()), " ")}
	for _, v := range []struct {
		name string
		p    PubLatency
	}{{"before", pub.Before}, {"after", pub.After}} {
		se := report.Series{Name: "published " + v.name}
		for i, x := range v.p.MaxSmallest {
			se.Points = append(se.Points, report.Point{X: float64(i+1) / float64(v.p.Samples), Y: x})
		}
		for i, x := range v.p.MaxLargest {
			se.Points = append(se.Points, report.Point{X: float64(v.p.Samples-len(v.p.MaxLargest)+i+1) / float64(v.p.Samples), Y: x})
		}
		ch.Series = append(ch.Series, se)
		if r, ok := find(v.name); ok && len(r.OpMaxUSRuns) > 0 {
			se := report.Series{Name: mach + " " + v.name}
			sorted := slices.Sorted(slices.Values(r.OpMaxUSRuns))
			for i, x := range sorted {
				se.Points = append(se.Points, report.Point{X: float64(i+1) / float64(len(sorted)), Y: x / 1000})
			}
			ch.Series = append(ch.Series, se)
		}
	}
	part.Charts = append(part.Charts, ch)
	if !okb || !oka || len(b.OpMaxUSRuns) == 0 || len(a.OpMaxUSRuns) == 0 {
		return part, ""
	}
	return part, simVerdict003(mach, pub, b, a)
}

// simVerdict003 is the clause that says whether the simulated test
// reproduces the seed, by these tests: the median per-sample maximum
// at least 6x lower after (the cover letter's "close to 10x"), after-design
// maxima at most 0.5 ms in at least 90% of samples, and the median
// per-sample means within 2x of the published ones.
func simVerdict003(mach string, pub *PubMapscan, b, a mapscan.Result) string {
	ratio := report.Median(b.OpMaxUSRuns) / report.Median(a.OpMaxUSRuns)
	n := len(a.OpMaxUSRuns)
	low := under(a.OpMaxUSRuns, 500)
	mb, ma := report.Median(b.OpMeanUSRuns)/1000, report.Median(a.OpMeanUSRuns)/1000
	within := func(x, p float64) bool { return x <= 2*p && x >= p/2 }
	ok := ratio >= 6 && 10*low >= 9*n && within(mb, pub.Before.MedianMean) && within(ma, pub.After.MedianMean)
	verdict := "does not reproduce the seed"
	if ok {
		verdict = "reproduces the seed"
	}
	return fmt.Sprintf("%s %s: median per-sample maximum %.1fx lower after (the seed close to 10x), after-design maxima <= 0.5 ms in %d of %d samples, median per-sample means %s and %s ms (the seed %s and %s)",
		mach, verdict, ratio, low, n, ms(mb, true), ms(ma, true), ms(pub.Before.MedianMean, true), ms(pub.After.MedianMean, true))
}

// under counts the values of xs at most lim.
func under(xs []float64, lim float64) int {
	n := 0
	for _, x := range xs {
		if x <= lim {
			n++
		}
	}
	return n
}
