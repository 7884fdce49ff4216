package report

import (
	"bytes"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"mmlab/report/reporttest"
)

func render(t *testing.T, p *Page) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteHTML(&buf, p); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var notANumber = regexp.MustCompile(`NaN|[-+]?Inf`)

// parse parses a rendered page.
func parse(t *testing.T, page []byte) *reporttest.Node {
	t.Helper()
	root, err := reporttest.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// checkPage checks a rendered page of p: what reporttest.Check checks, and
// that it found each seed of p in order with its title, verdict and charts,
// and every table of p.
func checkPage(t *testing.T, root *reporttest.Node, p *Page) {
	t.Helper()
	sum := reporttest.Check(t, root)
	if len(sum.Seeds) != len(p.Seeds) {
		t.Fatalf("%d seed sections, want %d", len(sum.Seeds), len(p.Seeds))
	}
	tables := 0
	for i, s := range p.Seeds {
		got := sum.Seeds[i]
		charts := 0
		for _, part := range s.Parts {
			charts += len(part.Charts)
			tables += len(part.Tables)
		}
		if got.ID != s.ID || !strings.Contains(got.Heading, s.Title) || !strings.Contains(got.Verdict, s.Verdict) || got.Charts != charts {
			t.Errorf("seed %d: found %+v, want seed %s %q with verdict %q and %d charts", i, got, s.ID, s.Title, s.Verdict, charts)
		}
	}
	if p.Comparison != nil {
		tables++
	}
	if len(p.Hosts) > 0 {
		tables++
	}
	if sum.Tables != tables {
		t.Errorf("%d tables, want %d", sum.Tables, tables)
	}
}

func TestWriteHTMLSample(t *testing.T) {
	p := samplePage()
	out := render(t, p)
	checkPage(t, parse(t, out), p)
	// Self-contained: no script, stylesheet, image or font is fetched.
	for _, bad := range []string{"<script", "<link", "<img", "src=", "url(", "@import", "@font-face"} {
		if bytes.Contains(out, []byte(bad)) {
			t.Errorf("the page contains %q", bad)
		}
	}
	if got := regexp.MustCompile(`https?://[^"]*`).FindAllString(string(out), -1); len(got) != len(regexp.MustCompile(`xmlns="http://www.w3.org/2000/svg"`).FindAll(out, -1)) {
		t.Errorf("addresses other than the SVG namespace: %q", got)
	}
	if bytes.Contains(out, []byte("data-interrupted")) {
		t.Error("a finished run is marked interrupted")
	}
	p.Interrupted = true
	if !bytes.Contains(render(t, p), []byte("data-interrupted")) {
		t.Error("an interrupted run has no banner")
	}
}

func TestWriteHTMLEscapes(t *testing.T) {
	evil := `<script>alert("x")</script>&`
	p := &Page{
		Title:      evil,
		Hosts:      []Host{{Name: evil}},
		Notes:      []string{evil},
		Comparison: &Table{Columns: []string{evil}, Rows: [][]string{{evil}}},
		Seeds: []Seed{{ID: `0"0`, Title: evil, Verdict: evil, Parts: []Part{{
			Title: evil, Text: evil,
			Tables: []Table{{Title: evil, Columns: []string{evil}, Rows: [][]string{{evil}}}},
			Charts: []Chart{{Title: evil, Kind: Bars, XLabel: evil, YLabel: evil, Categories: []string{evil},
				Series:  []Series{{Name: evil, Points: []Point{{0, 1}}}},
				Refs:    []Ref{{Label: evil, Y: 0.5}},
				Command: evil}},
		}}}},
	}
	out := string(render(t, p))
	if strings.Contains(out, "<script") {
		t.Fatal("a text of the page model reached the page unescaped")
	}
	root := parse(t, []byte(out))
	// The texts come back whole when the page is parsed.
	want := map[string]bool{"title": true, "h1": true, "h2": true, "h3": true, "pre": true, "td": true, "th": true, "figcaption": true, "code": true, "tspan": true}
	for _, n := range root.All(func(n *reporttest.Node) bool { return want[n.Name] }) {
		if strings.Contains(n.Text(), evil) {
			delete(want, n.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("no element of %v holds %q", want, evil)
	}
	if g := root.All(reporttest.Tag("g", "series")); len(g) != 1 || g[0].Attr["data-name"] != evil {
		t.Errorf("series attribute = %v", g)
	}
}

// chartOf renders a page of one chart and returns its figure.
func chartOf(t *testing.T, ch Chart) (*reporttest.Node, string) {
	t.Helper()
	out := render(t, &Page{Seeds: []Seed{{ID: "000", Parts: []Part{{Charts: []Chart{ch}}}}}})
	if m := notANumber.Find(out); m != nil {
		t.Errorf("the page holds %q", m)
	}
	figs := parse(t, out).All(reporttest.Tag("figure", "chart"))
	if len(figs) != 1 {
		t.Fatalf("%d charts", len(figs))
	}
	return figs[0], string(out)
}

func TestChartSkipsNonFinite(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, kind := range []ChartKind{Lines, Dots, Bars} {
		t.Run(string(kind), func(t *testing.T) {
			ch := Chart{Kind: kind, Categories: []string{"a", "b"}, LogY: kind == Dots, Series: []Series{
				{Name: "good", Points: []Point{{0, 1}, {1, 2}, {1, nan}}},
				{Name: "bad", Points: []Point{{0, nan}, {1, inf}, {nan, 1}, {0, math.Inf(-1)}}},
				{Name: "none"},
			}, Refs: []Ref{{Label: "r", Y: nan}}}
			f, _ := chartOf(t, ch)
			if f.Attr["data-points"] != "2" || f.Attr["data-skipped"] != "5" || f.Attr["data-empty-series"] != "2" || f.Attr["data-series"] != "3" {
				t.Errorf("attributes %v", f.Attr)
			}
			if n := len(f.All(reporttest.Tag("path", "pt"))); n != 2 {
				t.Errorf("%d points drawn, want 2", n)
			}
			if n := len(f.All(reporttest.Tag("g", "ref"))); n != 0 {
				t.Errorf("%d reference lines drawn, want 0", n)
			}
			txt := f.Text()
			for _, want := range []string{"5 points not drawn: not a finite number.", "1 reference line not drawn", "bad (no data)", "none (no data)"} {
				if !strings.Contains(txt, want) {
					t.Errorf("chart text lacks %q", want)
				}
			}
			if strings.Contains(txt, "good (no data)") {
				t.Error("a series with points is marked empty")
			}
		})
	}
}

func TestChartWithoutData(t *testing.T) {
	for _, logY := range []bool{false, true} {
		f, _ := chartOf(t, Chart{Kind: Lines, LogY: logY, Series: []Series{{Name: "s", Points: []Point{{1, math.NaN()}}}}})
		if f.Attr["data-points"] != "0" || !strings.Contains(f.Text(), "no data") {
			t.Errorf("logY=%v: %v %q", logY, f.Attr, f.Text())
		}
	}
}

func TestChartSkipsOffAxis(t *testing.T) {
	f, _ := chartOf(t, Chart{Kind: Dots, LogY: true, Categories: []string{"a"}, Series: []Series{
		{Name: "s", Points: []Point{{0, 5}, {0, 0}, {0, -1}, {1, 5}, {0.5, 5}, {-1, 5}}},
	}})
	if f.Attr["data-points"] != "1" || f.Attr["data-skipped"] != "5" {
		t.Errorf("attributes %v", f.Attr)
	}
	for _, want := range []string{"2 points not drawn: zero or negative on the logarithmic axis.", "3 points not drawn: X is not one of the 1 categories."} {
		if !strings.Contains(f.Text(), want) {
			t.Errorf("chart text lacks %q", want)
		}
	}
}

func TestChartManySeries(t *testing.T) {
	var ss []Series
	for i := range 42 {
		ss = append(ss, Series{Name: "v" + strconv.Itoa(i), Points: []Point{{1, float64(i + 1)}, {2, float64(i + 2)}}})
	}
	v := layoutChart(&Chart{Kind: Lines, Series: ss})
	seen := map[string]string{}
	for _, s := range v.Series {
		key := s.Color + " " + s.Marker
		if other, dup := seen[key]; dup {
			t.Errorf("%s and %s are both drawn %s", other, s.Name, key)
		}
		seen[key] = s.Name
	}
	f, _ := chartOf(t, Chart{Kind: Lines, Series: ss})
	if n := len(f.All(reporttest.Tag("li"))); n != 42 {
		t.Errorf("%d legend entries, want 42", n)
	}
	if n := len(f.All(reporttest.Tag("polyline"))); n != 42 {
		t.Errorf("%d lines, want 42", n)
	}
}

// TestChartPlacesPoints checks the geometry: a point at the top of the
// domain sits on the plot's top edge, and a log axis puts 10 halfway
// between 1 and 100.
func TestChartPlacesPoints(t *testing.T) {
	v := layoutChart(&Chart{Kind: Lines, Series: []Series{{Name: "s", Points: []Point{{1, 0}, {2, 10}}}}})
	if v.YTicks[0].Lines[0] != "0" || v.YTicks[len(v.YTicks)-1].Lines[0] != "10" {
		t.Errorf("y ticks %v", v.YTicks)
	}
	pts := strings.Fields(v.Series[0].Line)
	if len(pts) != 2 || !strings.HasSuffix(pts[0], ","+v.Y1) || !strings.HasSuffix(pts[1], ","+v.Y0) {
		t.Errorf("line %q, plot from y=%s to y=%s", v.Series[0].Line, v.Y0, v.Y1)
	}
	lv := layoutChart(&Chart{Kind: Lines, LogY: true, Series: []Series{{Name: "s", Points: []Point{{1, 1}, {2, 10}, {3, 100}}}}})
	y := func(p string) float64 {
		f, _ := strconv.ParseFloat(p[strings.Index(p, ",")+1:], 64)
		return f
	}
	lp := strings.Fields(lv.Series[0].Line)
	if mid := (y(lp[0]) + y(lp[2])) / 2; math.Abs(mid-y(lp[1])) > 0.1 {
		t.Errorf("log axis: 10 at y=%v, want %v", y(lp[1]), mid)
	}
}

// A logarithmic X axis places CPU counts that double at equal steps, one
// tick per count, and leaves out a point at zero with a note.
func TestLogX(t *testing.T) {
	v := layoutChart(&Chart{Kind: Lines, LogX: true, Series: []Series{{Name: "s", Points: []Point{{1, 1}, {2, 2}, {4, 3}, {0, 4}}}}})
	if len(v.XTicks) != 3 || v.Skipped != 1 {
		t.Fatalf("ticks %+v, skipped %d", v.XTicks, v.Skipped)
	}
	x := func(i int) float64 { f, _ := strconv.ParseFloat(v.XTicks[i].X, 64); return f }
	if d1, d2 := x(1)-x(0), x(2)-x(1); math.Abs(d1-d2) > 0.2 || d1 <= 0 {
		t.Errorf("ticks at %v, %v, %v: want equal steps", x(0), x(1), x(2))
	}
}
