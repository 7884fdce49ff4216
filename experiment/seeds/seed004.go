package seeds

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"mmlab/experiment"
	"mmlab/experiment/attach"
	"mmlab/experiment/trigger"
	"mmlab/report"
)

func seed004() *Seed {
	return &Seed{
		ID:      "004",
		Steps:   []Step{step(trigger.Def), step(attach.Def)},
		section: section004,
	}
}

// flavourHint is what the kernel release implies of the hit path's
// protection: a hint, not a measurement.
func flavourHint(kernel string) string {
	rel := strings.TrimPrefix(kernel, "linux ")
	var maj, min int
	if _, err := fmt.Sscanf(rel, "%d.%d", &maj, &min); err != nil {
		return ""
	}
	switch v := maj*1000 + min; {
	case v >= 6013:
		return fmt.Sprintf("Linux %d.%d implies RCU Tasks Trace (the release is a hint, not a measurement)", maj, min)
	case v == 6012:
		return "Linux 6.12 implies SRCU (the release is a hint, not a measurement)"
	default:
		return fmt.Sprintf("Linux %d.%d predates the RCU-protected hit path (uprobes_treelock; a hint from the release)", maj, min)
	}
}

func section004(s *Seed, docs Docs) report.Seed {
	sec := report.Seed{ID: s.ID, Title: s.Published.Title, Summary: s.Published.Summary, Source: s.Published.Source}
	var lines []string
	if trig, line := addPart(&sec, docs, "trigger", s.triggerPart); trig != nil {
		if line != "" {
			lines = append(lines, line)
			sec.Headline = line
		}
		lines = append(lines, skipped("trigger", trig.Skipped)...)
		if h := flavourHint(trig.Machine.Kernel); h != "" {
			lines = append(lines, h)
		}
	}
	var att report.Document[attach.Options, attach.Result]
	if decode(docs, "attach", &att) {
		part := report.Part{Experiment: "attach", Title: "Time to attach and detach N uprobes (detach ends with uprobe_unregister_sync)"}
		t := report.Table{Columns: []string{"target", "link", "n", "attach ms", "detach ms"}}
		for _, r := range att.Results {
			t.Rows = append(t.Rows, []string{column(r.Target, r.Variant), r.Attach, strconv.Itoa(r.N), ms(r.AttachMs, true), ms(r.DetachMs, true)})
			if r.Target == experiment.Live && r.Attach == attach.ModeMulti && r.N == 1 {
				lines = append(lines, fmt.Sprintf("detaching one uprobe_multi link (uprobe_unregister_sync) takes %s ms", ms(r.DetachMs, true)))
			}
		}
		part.Tables = append(part.Tables, t)
		sec.Parts = append(sec.Parts, part)
		lines = append(lines, skipped("attach", att.Skipped)...)
	}
	if len(lines) == 0 {
		lines = []string{"no result"}
	}
	sec.Verdict = "seed 004: " + strings.Join(lines, "; ")
	return sec
}

// triggerPart is seed 004's own figure: hits per second against CPUs,
// shown as ratios beside the seed's (2-CPU/1-CPU and tasks-trace/srcu),
// since rates compare only within one target. The model's srcu and
// tasks-trace variants are the seed's era and are compared with the seed's
// figures; v6.14+ is today's hit path, beside the live kernel.
func (s *Seed) triggerPart(doc *report.Document[trigger.Options, trigger.Result]) (report.Part, string) {
	part := report.Part{Experiment: "trigger", Title: "uprobe hits per second on 1..N CPUs (bench trig-*)"}
	rate := func(target experiment.Target, variant, attachMode, c string, cpus int) (float64, bool) {
		i := slices.IndexFunc(doc.Results, func(r trigger.Result) bool {
			return r.Target == target && r.Variant == variant && r.Case == c && r.CPUs == cpus &&
				(target == experiment.Model || r.Attach == attachMode)
		})
		if i < 0 {
			return 0, false
		}
		return doc.Results[i].Mops, true
	}
	pub := func(c string, cpus int, tt bool) (float64, bool) {
		i := slices.IndexFunc(s.Published.Trigger, func(p PubTrigger) bool { return p.Case == c && p.CPUs == cpus })
		if i < 0 {
			return 0, false
		}
		if tt {
			return s.Published.Trigger[i].TasksTrace, true
		}
		return s.Published.Trigger[i].SRCU, true
	}
	type col struct {
		name             string
		target           experiment.Target
		variant, attachm string
	}
	cols := []col{{"model srcu (v6.12)", experiment.Model, "srcu", ""}, {"model tasks-trace (v6.12)", experiment.Model, "tasks-trace", ""},
		{"model v6.14+", experiment.Model, "v6.14+", ""},
		{"live uprobe_multi", experiment.Live, experiment.VariantKernel, attach.ModeMulti}, {"live perf", experiment.Live, experiment.VariantKernel, attach.ModePerf}}
	var cases []string
	var cpus []int
	for _, r := range doc.Results {
		if r.Case != "nop" && !slices.Contains(cases, r.Case) {
			cases = append(cases, r.Case)
		}
		if !slices.Contains(cpus, r.CPUs) {
			cpus = append(cpus, r.CPUs)
		}
	}
	slices.Sort(cpus)
	t := report.Table{
		Title:   fmt.Sprintf("M hits/s. published: %s; here: %s", s.Published.Setting, settingLine(doc.Machine, "model CPUs are goroutines on pinned threads")),
		Columns: []string{"case", "CPUs", "published srcu", "published tasks-trace"},
	}
	for _, c := range cols {
		t.Columns = append(t.Columns, c.name)
	}
	scale := report.Table{Title: "scaling from 1 CPU to 2 (rate on 2 CPUs / rate on 1): the figure that compares across targets",
		Columns: []string{"case", "published srcu", "published tasks-trace"}}
	for _, c := range cols {
		scale.Columns = append(scale.Columns, c.name)
	}
	ratio := func(a, b float64, oka, okb bool) string {
		if !oka || !okb || b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", a/b)
	}
	line := ""
	for _, c := range cases {
		for _, n := range cpus {
			ps, oks := pub(c, n, false)
			pt, okt := pub(c, n, true)
			row := []string{c, strconv.Itoa(n), mops(ps, oks), mops(pt, okt)}
			for _, k := range cols {
				x, ok := rate(k.target, k.variant, k.attachm, c, n)
				row = append(row, mops(x, ok))
			}
			t.Rows = append(t.Rows, row)
		}
		p1, ok1 := pub(c, 1, false)
		p2, ok2 := pub(c, 2, false)
		q1, okq1 := pub(c, 1, true)
		q2, okq2 := pub(c, 2, true)
		row := []string{c, ratio(p2, p1, ok2, ok1), ratio(q2, q1, okq2, okq1)}
		for _, k := range cols {
			a, oka := rate(k.target, k.variant, k.attachm, c, 2)
			b, okb := rate(k.target, k.variant, k.attachm, c, 1)
			row = append(row, ratio(a, b, oka, okb))
			if c == "uprobe-nop" && k.attachm == attach.ModeMulti && oka && okb && b > 0 {
				line = fmt.Sprintf("this kernel's hit path scales %.2fx from 1 CPU to 2 (uprobe-nop, uprobe_multi; the seed: %s SRCU, %s Tasks Trace)",
					a/b, ratio(p2, p1, ok2, ok1), ratio(q2, q1, okq2, okq1))
			}
		}
		scale.Rows = append(scale.Rows, row)
	}
	part.Tables = append(part.Tables, t, scale)
	// The model's rate per producer CPU-second, the figure a shared host
	// distorts least, as scaling beside the seed's.
	cpuRate := func(variant, c string, cpus int) (float64, bool) {
		i := slices.IndexFunc(doc.Results, func(r trigger.Result) bool {
			return r.Target == experiment.Model && r.Variant == variant && r.Case == c && r.CPUs == cpus && r.PerCPU != nil
		})
		if i < 0 {
			return 0, false
		}
		return doc.Results[i].MopsCPU, true
	}
	for _, c := range cases {
		var parts []string
		for _, v := range []string{"srcu", "tasks-trace", "v6.14+"} {
			a, oka := cpuRate(v, c, 2)
			b, okb := cpuRate(v, c, 1)
			if oka && okb && b > 0 {
				parts = append(parts, fmt.Sprintf("%s %.2fx", v, a/b))
			}
		}
		if len(parts) > 0 {
			p1, ok1 := pub(c, 1, false)
			p2, ok2 := pub(c, 2, false)
			q1, okq1 := pub(c, 1, true)
			q2, okq2 := pub(c, 2, true)
			part.Notes = append(part.Notes, fmt.Sprintf("model %s per CPU-second, 2 CPUs / 1: %s (the seed: %s SRCU, %s Tasks Trace)",
				c, strings.Join(parts, ", "), ratio(p2, p1, ok2, ok1), ratio(q2, q1, okq2, okq1)))
		}
	}
	for _, c := range cases {
		ps, oks := pub(c, 1, false)
		pt, okt := pub(c, 1, true)
		b, okb := rate(experiment.Model, "srcu", "", c, 1)
		a, oka := rate(experiment.Model, "tasks-trace", "", c, 1)
		if okb && oka && oks && okt && b > 0 && ps > 0 {
			part.Notes = append(part.Notes, fmt.Sprintf("model tasks-trace/srcu (the seed's era), %s on 1 CPU: %.3f (the seed: %.3f)", c, a/b, pt/ps))
		}
	}

	// Charts: the rate relative to one CPU, published beside ours, and
	// the rates themselves.
	command := "mmlab run trigger " + strings.Join(experiment.Args(&doc.Params, trigger.NewOptions()), " ")
	for _, c := range cases {
		rel := report.Chart{Title: c + ": rate relative to 1 CPU", Kind: report.Lines, XLabel: "CPUs (producers)",
			YLabel: "rate / rate on 1 CPU (x)", Command: command, Refs: []report.Ref{{Label: "no scaling", Y: 1}}}
		abs := report.Chart{Title: c + ": hits per second", Kind: report.Lines, XLabel: "CPUs (producers)",
			YLabel: "M hits/s", LogY: true, Command: command}
		for _, tt := range []bool{false, true} {
			name := "published srcu"
			if tt {
				name = "published tasks-trace"
			}
			se := report.Series{Name: name}
			base, ok := pub(c, 1, tt)
			for _, n := range cpus {
				if x, okx := pub(c, n, tt); ok && okx {
					se.Points = append(se.Points, report.Point{X: float64(n), Y: x / base})
				}
			}
			if len(se.Points) > 0 {
				rel.Series = append(rel.Series, se)
			}
		}
		for _, k := range cols {
			se, sa := report.Series{Name: k.name}, report.Series{Name: k.name}
			base, ok := rate(k.target, k.variant, k.attachm, c, 1)
			for _, n := range cpus {
				if x, okx := rate(k.target, k.variant, k.attachm, c, n); okx {
					sa.Points = append(sa.Points, report.Point{X: float64(n), Y: x})
					if ok && base > 0 {
						se.Points = append(se.Points, report.Point{X: float64(n), Y: x / base})
					}
				}
			}
			if len(sa.Points) > 0 {
				rel.Series = append(rel.Series, se)
				abs.Series = append(abs.Series, sa)
			}
		}
		part.Charts = append(part.Charts, rel, abs)
	}
	return part, line
}

func mops(x float64, ok bool) string {
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.3f", x)
}
