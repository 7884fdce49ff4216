package seeds

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"mmlab/experiment"
	"mmlab/experiment/attach"
	"mmlab/experiment/trigger"
	"mmlab/report"
	"mmlab/uapi"
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
	if sim, line := addPart(&sec, docs, SimKey("trigger"), s.simTriggerPart); sim != nil && line != "" {
		lines = append(lines, line)
	}
	var att report.Document[attach.Options, attach.Result]
	if decode(docs, "attach", &att) {
		part := report.Part{Experiment: "attach", Title: "Time to attach and detach N uprobes (detach ends with uprobe_unregister_sync)"}
		t := report.Table{Columns: []string{"target", "link", "n", "attach ms", "detach ms"}}
		for _, r := range att.Results {
			t.Rows = append(t.Rows, []string{column(r.Target, r.Variant), r.Attach, strconv.Itoa(r.N), ms(r.AttachMs, true), ms(r.DetachMs, true)})
			if r.Target == experiment.Live && r.Attach == uapi.AttachMulti && r.N == 1 {
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
	pub := s.pubTrigger
	type col struct {
		name             string
		target           experiment.Target
		variant, attachm string
	}
	cols := []col{{"model srcu (v6.12)", experiment.Model, "srcu", ""}, {"model tasks-trace (v6.12)", experiment.Model, "tasks-trace", ""},
		{"model v6.14+", experiment.Model, "v6.14+", ""},
		{"live uprobe_multi", experiment.Live, experiment.VariantKernel, uapi.AttachMulti}, {"live perf", experiment.Live, experiment.VariantKernel, uapi.AttachPerf}}
	cases, cpus := casesAndCPUs(doc.Results)
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
			if c == "uprobe-nop" && k.attachm == uapi.AttachMulti && oka && okb && b > 0 {
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

// simTriggerPart is seed 004's sweep on its machine (the sim step): the
// seed's two kernels and today's beside the published rows, one chart per
// case on logarithmic axes, and the verdict clause (simVerdict004).
func (s *Seed) simTriggerPart(doc *report.Document[trigger.Options, trigger.Result]) (report.Part, string) {
	name, mach := simMachine(doc.ModelMachine)
	part := report.Part{Experiment: "trigger", Title: "Seed 004's sweep on its machine (" + mach + "): uprobe hits per second on 1..80 CPUs"}
	pts := simPoints004(doc.Results)
	variants := []string{"srcu", "tasks-trace", "v6.14+"}
	t := report.Table{
		Title:   fmt.Sprintf("M hits/s. published: %s; %s: %s", s.Published.Setting, mach, simSetting(doc)),
		Columns: []string{"case", "CPUs", "published srcu", "published tasks-trace", mach + " srcu", mach + " tasks-trace", mach + " v6.14+", "sim/published srcu", "sim/published tasks-trace"},
	}
	cases, cpus := casesAndCPUs(doc.Results)
	ratio := func(a, b float64, ok bool) string {
		if !ok || b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", a/b)
	}
	command := "mmlab run trigger --target sim --machine " + name + " " + strings.Join(experiment.Args(&doc.Params, trigger.NewOptions()), " ")
	for _, c := range cases {
		ch := report.Chart{Title: c + ": hits per second, published and " + mach, Kind: report.Lines, XLabel: "CPUs (producers)",
			YLabel: "M hits/s", LogX: true, LogY: true, Command: command}
		for _, n := range cpus {
			ps, okp := s.pubTrigger(c, n, false)
			pt, okt := s.pubTrigger(c, n, true)
			row := []string{c, strconv.Itoa(n), mops(ps, okp), mops(pt, okt)}
			for _, v := range variants {
				r, ok := pts[simKey{v, c, n}]
				row = append(row, mops(r.Mops, ok))
			}
			rs, oks := pts[simKey{variants[0], c, n}]
			rt, okt2 := pts[simKey{variants[1], c, n}]
			row = append(row, ratio(rs.Mops, ps, oks && okp), ratio(rt.Mops, pt, okt2 && okt))
			t.Rows = append(t.Rows, row)
		}
		for i, name := range variants[:2] {
			se := report.Series{Name: "published " + name}
			for _, n := range cpus {
				if x, ok := s.pubTrigger(c, n, i == 1); ok {
					se.Points = append(se.Points, report.Point{X: float64(n), Y: x})
				}
			}
			if len(se.Points) > 0 {
				ch.Series = append(ch.Series, se)
			}
		}
		for _, v := range variants {
			se := report.Series{Name: mach + " " + v}
			for _, n := range cpus {
				if r, ok := pts[simKey{v, c, n}]; ok {
					se.Points = append(se.Points, report.Point{X: float64(n), Y: r.Mops})
				}
			}
			if len(se.Points) > 0 {
				ch.Series = append(ch.Series, se)
			}
		}
		part.Charts = append(part.Charts, ch)
	}
	part.Tables = append(part.Tables, t)
	for _, r := range doc.Results {
		if r.C2C != nil {
			part.Notes = append(part.Notes, fmt.Sprintf("contention profile, %s %s on %d CPUs: %s", r.Variant, r.Case, r.CPUs, trigger.C2CSummary(r)))
		}
	}
	line := simVerdict004(mach, s.Published.Trigger, pts)
	return part, line
}

// casesAndCPUs returns the probed cases of rs in order of appearance and
// their CPU counts in increasing order.
func casesAndCPUs(rs []trigger.Result) (cases []string, cpus []int) {
	for _, r := range rs {
		if r.Case != "nop" && !slices.Contains(cases, r.Case) {
			cases = append(cases, r.Case)
		}
		if !slices.Contains(cpus, r.CPUs) {
			cpus = append(cpus, r.CPUs)
		}
	}
	slices.Sort(cpus)
	return cases, cpus
}

// simMachine returns the name of a sim document's machine and its column
// label ("sim, NAME").
func simMachine(m *report.ModelMachine) (name, label string) {
	if m == nil {
		return "", "sim"
	}
	return m.Name, "sim, " + m.Name
}

// simSetting says how a sim document's points were taken.
func simSetting(doc *report.Document[trigger.Options, trigger.Result]) string {
	o := doc.Params
	return fmt.Sprintf("%v warm-up, samples of %v over %v of virtual time per point", o.Warmup, o.Interval, o.Duration)
}

// simKey names one point of a sim sweep.
type simKey struct {
	variant, c string
	cpus       int
}

// simPoints004 indexes the sim results of a sweep by variant, case and
// CPUs (the kernel's own nop5 optimization only).
func simPoints004(rs []trigger.Result) map[simKey]trigger.Result {
	m := map[simKey]trigger.Result{}
	for _, r := range rs {
		if r.Target == experiment.Sim {
			k := simKey{r.Variant, r.Case, r.CPUs}
			if _, dup := m[k]; !dup {
				m[k] = r
			}
		}
	}
	return m
}

// pubTrigger is the seed's rate of case c on cpus CPUs under Tasks Trace
// (tt) or SRCU.
func (s *Seed) pubTrigger(c string, cpus int, tt bool) (float64, bool) {
	i := slices.IndexFunc(s.Published.Trigger, func(p PubTrigger) bool { return p.Case == c && p.CPUs == cpus })
	if i < 0 {
		return 0, false
	}
	if tt {
		return s.Published.Trigger[i].TasksTrace, true
	}
	return s.Published.Trigger[i].SRCU, true
}

// simVerdict004 is the clause that says whether the simulated sweep
// reproduces the seed, by these tests: tasks-trace at least srcu at
// every published point (or within the larger of the two points' spreads),
// its lead on one CPU between +1% and +8%, each kernel's peak at 4, 8 or
// 16 CPUs with a fall beyond it, and each published point within 1.5x.
func simVerdict004(mach string, pub []PubTrigger, pts map[simKey]trigger.Result) string {
	srcu, tt := "srcu", "tasks-trace"
	var total, near, geN, geOK int
	leadOK := true
	worst, worstName := 1.0, ""
	var leads, peaks []string
	peak := map[[2]string]int{}
	best := map[[2]string]float64{}
	last := map[[2]string]float64{}
	lastN := map[[2]string]int{}
	for _, p := range pub {
		rs, oks := pts[simKey{srcu, p.Case, p.CPUs}]
		rt, okt := pts[simKey{tt, p.Case, p.CPUs}]
		if !oks || !okt {
			continue
		}
		geN++
		if rt.Mops >= rs.Mops-max(rs.MopsStddev, rt.MopsStddev) {
			geOK++
		}
		if p.CPUs == 1 && rs.Mops > 0 {
			lead := rt.Mops/rs.Mops - 1
			leads = append(leads, fmt.Sprintf("%s %+.1f%%", p.Case, lead*100))
			leadOK = leadOK && lead >= 0.01 && lead <= 0.08
		}
		for _, k := range []struct {
			v   string
			sim float64
			pub float64
		}{{srcu, rs.Mops, p.SRCU}, {tt, rt.Mops, p.TasksTrace}} {
			total++
			r := k.sim / k.pub
			if r <= 1.5 && r >= 1/1.5 {
				near++
			}
			if d := math.Abs(math.Log(r)); d > math.Abs(math.Log(worst)) {
				worst, worstName = r, fmt.Sprintf("%s %s on %d CPUs", k.v, p.Case, p.CPUs)
			}
			key := [2]string{k.v, p.Case}
			if k.sim > best[key] {
				best[key], peak[key] = k.sim, p.CPUs
			}
			if p.CPUs > lastN[key] {
				last[key], lastN[key] = k.sim, p.CPUs
			}
		}
	}
	if total == 0 {
		return ""
	}
	reproduced := geOK == geN && leadOK && len(leads) > 0
	for _, c := range []string{"uprobe-nop", "uretprobe-nop"} {
		for _, v := range []string{srcu, tt} {
			key := [2]string{v, c}
			if _, ok := peak[key]; !ok {
				continue
			}
			falls := last[key] < best[key]
			peaks = append(peaks, fmt.Sprintf("%s %s %d", v, c, peak[key]))
			reproduced = reproduced && peak[key] >= 4 && peak[key] <= 16 && falls
		}
	}
	reproduced = reproduced && near == total
	verdict := "does not reproduce the seed"
	if reproduced {
		verdict = "reproduces the seed"
	}
	return fmt.Sprintf("%s %s: tasks-trace at least srcu at %d of %d points, on 1 CPU %s (the seed +3.7%%, +5.8%%); peaks at %s CPUs (the seed 8); %d of %d published points within 1.5x (furthest %s, %.2fx)",
		mach, verdict, geOK, geN, strings.Join(leads, ", "), strings.Join(peaks, ", "), near, total, worstName, worst)
}
