package report

import (
	"bytes"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func render(t *testing.T, p *Page) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteHTML(&buf, p); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var (
	hasNumber   = regexp.MustCompile(`[0-9]`)
	notANumber  = regexp.MustCompile(`NaN|[-+]?Inf`)
	plainNumber = regexp.MustCompile(`^[-+]?[0-9]+(\.[0-9]+)?`)
)

// checkPage checks a rendered page of p as a reader would look at it:
// every seed with its verdict, every chart drawn with all its series and
// points, no NaN or Inf anywhere, every table with numbers in it.
func checkPage(t *testing.T, root *node, p *Page) {
	t.Helper()
	var all []*node
	all = root.all(func(*node) bool { return true })
	for _, n := range all {
		for k, v := range n.Attr {
			if notANumber.MatchString(v) {
				t.Errorf("<%s %s=%q>: not a number", n.Name, k, v)
			}
		}
		if notANumber.MatchString(n.Text) {
			t.Errorf("<%s>%q: not a number", n.Name, n.Text)
		}
	}

	seeds := root.all(tag("section", "seed"))
	if len(seeds) != len(p.Seeds) {
		t.Fatalf("%d seed sections, want %d", len(seeds), len(p.Seeds))
	}
	charts := 0
	for i, sec := range seeds {
		s := p.Seeds[i]
		if h := sec.all(tag("h2")); len(h) != 1 || !strings.Contains(h[0].text(), s.Title) {
			t.Errorf("seed %s: heading %v, want one with %q", s.ID, h, s.Title)
		}
		if v := sec.all(tag("p", "verdict")); len(v) != 1 || !strings.Contains(v[0].text(), s.Verdict) {
			t.Errorf("seed %s: verdict missing", s.ID)
		}
		want := 0
		for _, part := range s.Parts {
			want += len(part.Charts)
		}
		figs := sec.all(tag("figure", "chart"))
		if len(figs) != want {
			t.Errorf("seed %s: %d charts, want %d", s.ID, len(figs), want)
		}
		charts += len(figs)
		for _, f := range figs {
			checkChart(t, s.ID, f)
		}
	}
	if charts == 0 {
		t.Error("no chart on the page")
	}

	tables := root.all(tag("table"))
	want := 0
	for _, s := range p.Seeds {
		for _, part := range s.Parts {
			want += len(part.Tables)
		}
	}
	if p.Comparison != nil {
		want++
	}
	if len(p.Hosts) > 0 {
		want++
	}
	if len(tables) != want {
		t.Errorf("%d tables, want %d", len(tables), want)
	}
	for i, tb := range tables {
		cells := tb.all(tag("td"))
		numbers := 0
		for _, c := range cells {
			if plainNumber.MatchString(strings.TrimSpace(c.text())) {
				numbers++
			}
		}
		if len(cells) == 0 || numbers == 0 {
			t.Errorf("table %d: %d cells, %d numbers", i, len(cells), numbers)
		}
	}
}

// checkChart checks one drawn chart: its data attributes agree with what
// is drawn, every series has points and a legend entry, none is empty.
func checkChart(t *testing.T, seed string, f *node) {
	t.Helper()
	title := f.all(tag("figcaption"))[0].text()
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
	svgs := f.all(tag("svg"))
	if len(svgs) == 0 || svgs[0].Attr["viewbox"] == "" {
		t.Fatalf("seed %s chart %q: no scalable svg", seed, title)
	}
	if drawn := len(svgs[0].all(tag("path", "pt"))); drawn != points {
		t.Errorf("seed %s chart %q: %d points drawn, data-points=%d", seed, title, drawn, points)
	}
	gs := svgs[0].all(tag("g", "series"))
	if len(gs) != series {
		t.Errorf("seed %s chart %q: %d series drawn, want %d", seed, title, len(gs), series)
	}
	for _, g := range gs {
		if len(g.all(tag("path", "pt"))) == 0 {
			t.Errorf("seed %s chart %q: series %q has no point", seed, title, g.Attr["data-name"])
		}
	}
	items := f.all(func(n *node) bool { return n.Name == "li" && n.Attr["class"] != "ref-item" })
	if len(items) != series {
		t.Errorf("seed %s chart %q: %d legend entries, want %d", seed, title, len(items), series)
	}
	for _, it := range items {
		if _, empty := it.Attr["data-empty"]; empty || strings.Contains(it.text(), "(no data)") {
			t.Errorf("seed %s chart %q: empty series %q", seed, title, it.text())
		}
	}
	ticks := 0
	for _, g := range svgs[0].all(tag("g", "tick")) {
		ticks += len(g.all(tag("text")))
	}
	if ticks < 4 {
		t.Errorf("seed %s chart %q: %d tick labels", seed, title, ticks)
	}
	if !strings.Contains(f.text(), "Reproduce:") {
		t.Errorf("seed %s chart %q: no command", seed, title)
	}
}

func TestWriteHTMLSample(t *testing.T) {
	p := samplePage()
	out := render(t, p)
	checkPage(t, parseDOM(t, bytes.NewReader(out)), p)
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
	root := parseDOM(t, strings.NewReader(out))
	// The texts come back whole when the page is parsed.
	want := map[string]bool{"title": true, "h1": true, "h2": true, "h3": true, "pre": true, "td": true, "th": true, "figcaption": true, "code": true, "tspan": true}
	for _, n := range root.all(func(n *node) bool { return want[n.Name] }) {
		if strings.Contains(n.text(), evil) {
			delete(want, n.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("no element of %v holds %q", want, evil)
	}
	if g := root.all(tag("g", "series")); len(g) != 1 || g[0].Attr["data-name"] != evil {
		t.Errorf("series attribute = %v", g)
	}
}

// chartOf renders a page of one chart and returns its figure.
func chartOf(t *testing.T, ch Chart) (*node, string) {
	t.Helper()
	out := render(t, &Page{Seeds: []Seed{{ID: "000", Parts: []Part{{Charts: []Chart{ch}}}}}})
	if m := notANumber.Find(out); m != nil {
		t.Errorf("the page holds %q", m)
	}
	figs := parseDOM(t, bytes.NewReader(out)).all(tag("figure", "chart"))
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
			if n := len(f.all(tag("path", "pt"))); n != 2 {
				t.Errorf("%d points drawn, want 2", n)
			}
			if n := len(f.all(tag("g", "ref"))); n != 0 {
				t.Errorf("%d reference lines drawn, want 0", n)
			}
			txt := f.text()
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
		if f.Attr["data-points"] != "0" || !strings.Contains(f.text(), "no data") {
			t.Errorf("logY=%v: %v %q", logY, f.Attr, f.text())
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
		if !strings.Contains(f.text(), want) {
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
	if n := len(f.all(tag("li"))); n != 42 {
		t.Errorf("%d legend entries, want 42", n)
	}
	if n := len(f.all(tag("polyline"))); n != 42 {
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
