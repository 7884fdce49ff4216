package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"regexp"
	"strconv"
)

// The HTML report: one self-contained page (inline CSS and SVG, no script,
// no font or file fetched) drawn by html/template, which escapes every text
// of the page model.

//go:embed html.tmpl
var pageTemplate string

var tmpl = template.Must(template.New("page").Parse(pageTemplate))

// WriteHTML writes p as one self-contained HTML page: each seed's section
// (section.seed) with its verdict, tables, text and charts, then the
// comparison and the hosts. Each chart is a figure.chart whose attributes
// say what it drew (data-chart: its kind; data-points, data-series,
// data-empty-series: series without a point; data-skipped: points that
// could not be placed), for tests to read; package reporttest reads them.
func WriteHTML(w io.Writer, p *Page) error {
	return tmpl.Execute(w, newPageView(p))
}

type pageView struct {
	*Page
	HostTable  *tableView
	Comparison *tableView
	Seeds      []seedView
	Charts     int
}

type seedView struct {
	Seed
	Anchor string
	Parts  []partView
}

type partView struct {
	Part
	Tables []tableView
	Charts []chartView
}

type tableView struct {
	Title   string
	Columns []string
	Rows    [][]cellView
}

type cellView struct {
	Text  string
	Num   bool // starts with a number: set right-aligned in tabular figures
	Short bool // a few words, kept on one line (the table scrolls instead)
}

// numeric matches a cell that starts with a number ("174", "-1.3 ms",
// "1.26x", "400 → 4.2").
var numeric = regexp.MustCompile(`^[-+−]?[0-9]*\.?[0-9]`)

func newTableView(t *Table) tableView {
	tv := tableView{Title: t.Title, Columns: t.Columns}
	for _, r := range t.Rows {
		row := make([]cellView, len(r))
		for i, s := range r {
			row[i] = cellView{Text: s, Num: numeric.MatchString(s), Short: runes(s) <= 24}
		}
		tv.Rows = append(tv.Rows, row)
	}
	return tv
}

func newPageView(p *Page) pageView {
	v := pageView{Page: p}
	if len(p.Hosts) > 0 {
		t := Table{Columns: []string{"host", "kernel", "CPUs", "memory", "Go", "live setting", "model machine"}}
		for _, h := range p.Hosts {
			m := h.Machine
			t.Rows = append(t.Rows, []string{h.Name, m.Kernel, strconv.Itoa(m.CPUs), gib(m.MemBytes), m.Go, h.Setting, h.Model})
		}
		tv := newTableView(&t)
		v.HostTable = &tv
	}
	if p.Comparison != nil {
		tv := newTableView(p.Comparison)
		v.Comparison = &tv
	}
	for _, s := range p.Seeds {
		sv := seedView{Seed: s, Anchor: "seed-" + s.ID}
		for _, part := range s.Parts {
			pv := partView{Part: part}
			for i := range part.Tables {
				pv.Tables = append(pv.Tables, newTableView(&part.Tables[i]))
			}
			for i := range part.Charts {
				pv.Charts = append(pv.Charts, layoutChart(&part.Charts[i]))
				v.Charts++
			}
			sv.Parts = append(sv.Parts, pv)
		}
		v.Seeds = append(v.Seeds, sv)
	}
	return v
}

// gib prints a memory size in GiB, or nothing when it is unknown.
func gib(b int64) string {
	if b <= 0 {
		return ""
	}
	return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
}
