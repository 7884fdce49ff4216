// Package reporttest checks an HTML report of mmlab as a reader would see
// it: it parses the page (as report.WriteHTML wrote it, or as headless
// Chromium built it), checks every chart and table on it, and drives
// Chromium for the DOM and for screenshots. It is for tests, in the manner
// of net/http/httptest.
//
// The checks read the marks that report.WriteHTML puts on the page:
// section.seed (data-seed) with an h2 and a p.verdict; figure.chart with
// data-chart, data-points, data-series, data-empty-series and data-skipped,
// its svg with path.pt per point and g.series per series, its ul.legend
// with one li per series (li.ref-item per reference line, li[data-empty]
// for a series without data); every table in div.table-wrap.
package reporttest

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Node is an element of a parsed page.
type Node struct {
	Name     string            // lower case; "#text" for a run of text
	Attr     map[string]string // names in lower case
	Children []*Node           // elements and texts, in document order
	Chars    string            // the text of a "#text" node
}

// Parse parses an HTML page with encoding/xml in its lenient HTML mode
// (void elements closed, HTML entities known): enough for the DOM that
// Chromium serialises and for report.WriteHTML's output.
func Parse(r io.Reader) (*Node, error) {
	d := xml.NewDecoder(r)
	d.Strict = false
	d.AutoClose = xml.HTMLAutoClose
	d.Entity = xml.HTMLEntity
	root := &Node{Name: "#document", Attr: map[string]string{}}
	stack := []*Node{root}
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return root, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reporttest: parse the page: %w", err)
		}
		top := stack[len(stack)-1]
		switch tok := tok.(type) {
		case xml.StartElement:
			n := &Node{Name: strings.ToLower(tok.Name.Local), Attr: map[string]string{}}
			for _, a := range tok.Attr {
				n.Attr[strings.ToLower(a.Name.Local)] = a.Value
			}
			top.Children = append(top.Children, n)
			stack = append(stack, n)
		case xml.EndElement:
			name := strings.ToLower(tok.Name.Local)
			for i := len(stack) - 1; i > 0; i-- {
				if stack[i].Name == name {
					stack = stack[:i]
					break
				}
			}
		case xml.CharData:
			top.Children = append(top.Children, &Node{Name: "#text", Chars: string(tok)})
		}
	}
}

// All returns the elements under n, n included, for which match is true,
// in document order.
func (n *Node) All(match func(*Node) bool) []*Node {
	var out []*Node
	var walk func(*Node)
	walk = func(m *Node) {
		if match(m) {
			out = append(out, m)
		}
		for _, c := range m.Children {
			walk(c)
		}
	}
	walk(n)
	return out
}

// Tag matches the elements named name that have every class in classes.
func Tag(name string, classes ...string) func(*Node) bool {
	return func(n *Node) bool {
		if n.Name != name {
			return false
		}
		have := strings.Fields(n.Attr["class"])
		for _, c := range classes {
			found := false
			for _, h := range have {
				found = found || h == c
			}
			if !found {
				return false
			}
		}
		return true
	}
}

// Text is all the text under n.
func (n *Node) Text() string {
	var b strings.Builder
	for _, m := range n.All(func(*Node) bool { return true }) {
		b.WriteString(m.Chars)
	}
	return b.String()
}

// Seed is what Check found of one seed's section.
type Seed struct {
	ID, Heading, Verdict string
	Charts               int
}

// Summary is what Check found on a page.
type Summary struct {
	Seeds  []Seed
	Charts int
	Tables int
}

var (
	notANumber = regexp.MustCompile(`NaN|[-+]?Inf`)
	leadNumber = regexp.MustCompile(`^[-+]?[0-9]+(\.[0-9]+)?`)
)

// Check checks the page under root as a reader would look at it, reporting
// each fault with t.Errorf: no NaN or Inf in any text or attribute; each
// seed's section with a heading and a verdict; every chart drawn with as
// many points as it says, every series with points and a legend entry, no
// empty series, no point skipped, tick labels and the command under it;
// every table with a number in it. It returns what it found, for the caller
// to compare with what it expects.
func Check(t testing.TB, root *Node) Summary {
	t.Helper()
	for _, n := range root.All(func(*Node) bool { return true }) {
		for k, v := range n.Attr {
			if notANumber.MatchString(v) {
				t.Errorf("<%s %s=%q>: not a number", n.Name, k, v)
			}
		}
		if notANumber.MatchString(n.Chars) {
			t.Errorf("text %q: not a number", n.Chars)
		}
	}
	var sum Summary
	for _, sec := range root.All(Tag("section", "seed")) {
		s := Seed{ID: sec.Attr["data-seed"]}
		if h := sec.All(Tag("h2")); len(h) == 1 {
			s.Heading = strings.TrimSpace(h[0].Text())
		} else {
			t.Errorf("seed %s: %d headings, want 1", s.ID, len(h))
		}
		if v := sec.All(Tag("p", "verdict")); len(v) == 1 {
			s.Verdict = strings.TrimSpace(v[0].Text())
		}
		if s.Verdict == "" {
			t.Errorf("seed %s: no verdict", s.ID)
		}
		for _, f := range sec.All(Tag("figure", "chart")) {
			checkChart(t, s.ID, f)
			s.Charts++
		}
		sum.Charts += s.Charts
		sum.Seeds = append(sum.Seeds, s)
	}
	if len(sum.Seeds) == 0 {
		t.Error("no seed section on the page")
	}
	if sum.Charts == 0 {
		t.Error("no chart on the page")
	}
	for i, tb := range root.All(Tag("table")) {
		cells := tb.All(Tag("td"))
		numbers := 0
		for _, c := range cells {
			if leadNumber.MatchString(strings.TrimSpace(c.Text())) {
				numbers++
			}
		}
		if numbers == 0 {
			t.Errorf("table %d: %d cells, none a number", i+1, len(cells))
		}
		sum.Tables++
	}
	return sum
}

// checkChart checks one chart's figure: its data attributes agree with
// what is drawn, every series has points and a legend entry.
func checkChart(t testing.TB, seed string, f *Node) {
	t.Helper()
	title := ""
	if c := f.All(Tag("figcaption")); len(c) > 0 {
		title = c[0].Text()
	}
	attr := func(k string) int {
		n, err := strconv.Atoi(f.Attr[k])
		if err != nil {
			t.Errorf("seed %s chart %q: %s=%q", seed, title, k, f.Attr[k])
		}
		return n
	}
	points, series := attr("data-points"), attr("data-series")
	if points == 0 || series == 0 || attr("data-empty-series") != 0 || attr("data-skipped") != 0 {
		t.Errorf("seed %s chart %q: %v", seed, title, f.Attr)
	}
	svgs := f.All(Tag("svg"))
	if len(svgs) == 0 || svgs[0].Attr["viewbox"] == "" {
		t.Errorf("seed %s chart %q: no scalable svg", seed, title)
		return
	}
	plot := svgs[0]
	if drawn := len(plot.All(Tag("path", "pt"))); drawn != points {
		t.Errorf("seed %s chart %q: %d points drawn, data-points=%d", seed, title, drawn, points)
	}
	gs := plot.All(Tag("g", "series"))
	if len(gs) != series {
		t.Errorf("seed %s chart %q: %d series drawn, want %d", seed, title, len(gs), series)
	}
	for _, g := range gs {
		if len(g.All(Tag("path", "pt"))) == 0 {
			t.Errorf("seed %s chart %q: series %q has no point", seed, title, g.Attr["data-name"])
		}
	}
	items := f.All(func(n *Node) bool { return n.Name == "li" && n.Attr["class"] != "ref-item" })
	if len(items) != series {
		t.Errorf("seed %s chart %q: %d legend entries, want %d", seed, title, len(items), series)
	}
	for _, it := range items {
		if _, empty := it.Attr["data-empty"]; empty || strings.Contains(it.Text(), "(no data)") {
			t.Errorf("seed %s chart %q: empty series %q", seed, title, it.Text())
		}
	}
	ticks := 0
	for _, g := range plot.All(Tag("g", "tick")) {
		ticks += len(g.All(Tag("text")))
	}
	if ticks < 4 {
		t.Errorf("seed %s chart %q: %d tick labels", seed, title, ticks)
	}
	if !strings.Contains(f.Text(), "Reproduce:") {
		t.Errorf("seed %s chart %q: no command under it", seed, title)
	}
}
