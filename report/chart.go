package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A chart is laid out here into a chartView: every coordinate computed and
// printed as a string, every text a plain string. The HTML template draws
// the view as inline SVG and escapes the texts; nothing non-finite reaches
// it because points that cannot be placed are dropped, and counted, here.

// The chart's SVG canvas, in viewBox units.
const (
	chartW      = 520
	chartH      = 300 // with one line of X labels
	marginLeft  = 62  // at least: it grows with the Y labels
	marginRight = 12
	marginTop   = 12
	// charW is the width of a character of a tick label at the larger
	// size that narrow screens use, for wrapping category labels.
	charW = 7.8
	lineH = 15 // the line height of a wrapped category label
)

// palette is the Okabe–Ito colour-blind safe palette without its yellow,
// which is unreadable on white. Series cycle through it, and through
// markers, whose count is prime to it: 42 series differ before either
// pair repeats.
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"}

var markers = []string{"circle", "square", "triangle", "diamond", "down", "cross"}

// chartView is one laid-out chart.
type chartView struct {
	Kind           ChartKind
	Title, Command string
	W, H           int
	// The plot area.
	X0, Y0, X1, Y1 string
	XTicks, YTicks []tickView
	XLabel, YLabel labelView
	Series         []seriesView
	Refs           []refView
	Notes          []string
	Points         int  // points drawn
	Skipped        int  // points not drawn (not finite, not on the axis)
	Empty          int  // series without a point drawn
	NoData         bool // nothing drawn: "no data" at (NoDataX, NoDataY)
	NoDataX        string
	NoDataY        string
}

type tickView struct {
	X, Y   string   // the label's anchor
	Grid   string   // the grid line's fixed coordinate
	Lines  []string // the label, one or more lines
	Rotate string   // the label's transform when it is turned
}

type labelView struct {
	X, Y, Text string
}

type seriesView struct {
	Name    string
	Legend  string // the legend's text: the name, "(no data)" when empty
	Color   string
	Marker  string
	Swatch  string // path of the marker in the 28×16 legend swatch
	Line    string // Lines: the polyline's points
	Marks   []markView
	Medians []segView // Dots: the median of each category
	NoData  bool
	Points  int
}

type markView struct {
	D     string // the mark's path: a marker, or a bar
	Inner string // Bars: the white marker inside the bar
	Title string // the tooltip: series, X, Y
}

type segView struct{ X1, Y1, X2, Y2 string }

type refView struct {
	Y, X0, X1, LabelX, LabelY, Label string
}

// c prints a coordinate.
func c(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// value prints a data value for a tooltip.
func value(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

// crossPts is an X: a plus sign with arms 0.3 wide, turned 45 degrees.
var crossPts = func() []float64 {
	const w, s = 0.32, math.Sqrt2 / 2
	plus := []float64{-w, -1.2, w, -1.2, w, -w, 1.2, -w, 1.2, w, w, w, w, 1.2, -w, 1.2, -w, w, -1.2, w, -1.2, -w, -w, -w}
	out := make([]float64, len(plus))
	for i := 0; i < len(plus); i += 2 {
		x, y := plus[i], plus[i+1]
		out[i], out[i+1] = (x-y)*s, (x+y)*s
	}
	return out
}()

// markerPath returns the path of marker m of radius r centred at (x, y).
func markerPath(m string, x, y, r float64) string {
	p := func(pts ...float64) string {
		var b strings.Builder
		for i := 0; i < len(pts); i += 2 {
			if i == 0 {
				b.WriteString("M")
			} else {
				b.WriteString("L")
			}
			b.WriteString(c(x+pts[i]*r) + " " + c(y+pts[i+1]*r))
		}
		b.WriteString("Z")
		return b.String()
	}
	switch m {
	case "square":
		return p(-0.85, -0.85, 0.85, -0.85, 0.85, 0.85, -0.85, 0.85)
	case "triangle":
		return p(0, -1.15, 1.05, 0.75, -1.05, 0.75)
	case "down":
		return p(0, 1.15, 1.05, -0.75, -1.05, -0.75)
	case "diamond":
		return p(0, -1.2, 1.05, 0, 0, 1.2, -1.05, 0)
	case "cross":
		return p(crossPts...)
	}
	return fmt.Sprintf("M%s %sa%s %s 0 1 0 %s 0a%s %s 0 1 0 %s 0Z",
		c(x-r), c(y), c(r), c(r), c(2*r), c(r), c(r), c(-2*r))
}

// layoutChart lays ch out.
func layoutChart(ch *Chart) chartView {
	v := chartView{Kind: ch.Kind, Title: ch.Title, Command: ch.Command, W: chartW}
	categorical := ch.Kind == Dots || ch.Kind == Bars

	// The points that can be drawn, per series, and the reasons others
	// cannot.
	type pt struct{ x, y float64 }
	kept := make([][]pt, len(ch.Series))
	var nonFinite, nonPositive, offAxis int
	var ys, xs []float64
	for i, s := range ch.Series {
		for _, p := range s.Points {
			switch {
			case !plottable(p.X) || !plottable(p.Y):
				nonFinite++
			case ch.LogY && p.Y <= 0, ch.LogX && !categorical && p.X <= 0:
				nonPositive++
			case categorical && (p.X != math.Trunc(p.X) || p.X < 0 || int(p.X) >= len(ch.Categories)):
				offAxis++
			default:
				kept[i] = append(kept[i], pt{p.X, p.Y})
				ys = append(ys, p.Y)
				xs = append(xs, p.X)
			}
		}
	}
	var refs []Ref
	var badRefs int
	for _, r := range ch.Refs {
		if !plottable(r.Y) || ch.LogY && r.Y <= 0 {
			badRefs++
			continue
		}
		refs = append(refs, r)
		ys = append(ys, r.Y)
	}
	v.Skipped = nonFinite + nonPositive + offAxis
	if nonFinite > 0 {
		v.Notes = append(v.Notes, fmt.Sprintf("%s not drawn: not a finite number.", count(nonFinite, "point")))
	}
	if nonPositive > 0 {
		v.Notes = append(v.Notes, fmt.Sprintf("%s not drawn: zero or negative on the logarithmic axis.", count(nonPositive, "point")))
	}
	if offAxis > 0 {
		v.Notes = append(v.Notes, fmt.Sprintf("%s not drawn: X is not one of the %d categories.", count(offAxis, "point"), len(ch.Categories)))
	}
	if badRefs > 0 {
		v.Notes = append(v.Notes, fmt.Sprintf("%s not drawn: not a finite number (or not positive on the logarithmic axis).", count(badRefs, "reference line")))
	}

	// Y scale.
	var ysc scale
	switch {
	case len(ys) == 0 && ch.LogY:
		ysc = logScale(1, 10)
	case len(ys) == 0:
		ysc = linearScale(0, 1, 6, true)
	case ch.LogY:
		ysc = logScale(slices.Min(ys), slices.Max(ys))
	default:
		ysc = linearScale(slices.Min(ys), slices.Max(ys), 6, true)
	}
	v.NoData = len(xs) == 0

	// The left margin fits the longest Y tick label.
	x0 := float64(marginLeft)
	for _, t := range ysc.Ticks {
		x0 = max(x0, 30+charW*float64(runes(ysc.label(t))))
	}
	x1 := float64(chartW - marginRight)
	plotBottom := float64(chartH - 30 - lineH)

	// X categories: their labels wrapped to the band or, when a word is
	// wider than the band, turned (and the left margin made room for the
	// first). The canvas grows below the plot to fit the labels.
	below := 17.0 // from the plot's bottom to the first label's baseline
	var lines [][]string
	var band float64
	turn := false
	if categorical {
		n := float64(max(len(ch.Categories), 1))
		band = (x1 - x0) / n
		width := int(band / charW)
		longest := 0
		for _, cat := range ch.Categories {
			l := wrap(cat, width)
			lines = append(lines, l)
			for _, w := range l {
				turn = turn || runes(w) > width
			}
			longest = max(longest, runes(cat))
		}
		if turn {
			const cos, sin = 0.819, 0.574 // of the 35 degrees turned
			x0 = max(x0, float64(runes(ch.Categories[0]))*charW*cos+4-band/2)
			band = (x1 - x0) / n
			below = 12 + float64(longest)*charW*sin + 4
		} else {
			for _, l := range lines {
				below = max(below, 17+float64(len(l)-1)*lineH)
			}
		}
	}

	ysc.P0, ysc.P1 = plotBottom, marginTop
	v.X0, v.Y0, v.X1, v.Y1 = c(x0), c(marginTop), c(x1), c(plotBottom)
	for _, t := range ysc.Ticks {
		y := ysc.pos(t)
		v.YTicks = append(v.YTicks, tickView{X: c(x0 - 6), Y: c(y + 4), Grid: c(y), Lines: []string{ysc.label(t)}})
	}
	var xsc scale
	if categorical {
		for i, cat := range ch.Categories {
			x := x0 + band*(float64(i)+0.5)
			t := tickView{X: c(x), Y: c(plotBottom + 17), Grid: c(x), Lines: lines[i]}
			if turn {
				t.Y = c(plotBottom + 12)
				t.Lines = []string{cat}
				t.Rotate = "rotate(-35 " + t.X + " " + t.Y + ")"
			}
			v.XTicks = append(v.XTicks, t)
		}
	} else {
		xsc = numericX(xs, ch.LogX)
		xsc.P0, xsc.P1 = x0, x1
		for _, t := range xsc.Ticks {
			x := xsc.pos(t)
			v.XTicks = append(v.XTicks, tickView{X: c(x), Y: c(plotBottom + 17), Grid: c(x), Lines: []string{xsc.label(t)}})
		}
	}
	v.H = int(math.Ceil(plotBottom + below + 28))
	v.NoDataX, v.NoDataY = c((x0+x1)/2), c((marginTop+plotBottom)/2)
	v.XLabel = labelView{X: c((x0 + x1) / 2), Y: c(float64(v.H - 6)), Text: ch.XLabel}
	v.YLabel = labelView{X: "16", Y: c((marginTop + plotBottom) / 2), Text: ch.YLabel}

	for _, r := range refs {
		y := ysc.pos(r.Y)
		v.Refs = append(v.Refs, refView{Y: c(y), X0: c(x0), X1: c(x1), LabelX: c(x0 + 6), LabelY: c(y - 5),
			Label: r.Label + ": " + value(r.Y)})
	}

	// Series.
	k := len(ch.Series)
	inner := band * 0.8
	sub := inner / float64(max(k, 1))
	for i, s := range ch.Series {
		sv := seriesView{Name: s.Name, Legend: s.Name, Color: palette[i%len(palette)], Marker: markers[i%len(markers)]}
		sv.Swatch = markerPath(sv.Marker, 14, 8, 4.5)
		pts := kept[i]
		sv.Points = len(pts)
		if len(pts) == 0 {
			sv.NoData = true
			sv.Legend = s.Name + " (no data)"
			v.Empty++
		}
		v.Points += len(pts)
		title := func(p pt) string {
			x := value(p.x)
			if categorical {
				x = ch.Categories[int(p.x)]
			}
			return s.Name + " · " + x + ": " + value(p.y)
		}
		switch ch.Kind {
		case Dots:
			byCat := map[int][]pt{}
			for _, p := range pts {
				byCat[int(p.x)] = append(byCat[int(p.x)], p)
			}
			for ci := range ch.Categories {
				cp := byCat[ci]
				if len(cp) == 0 {
					continue
				}
				cx := x0 + band*float64(ci) + band*0.1 + sub*(float64(i)+0.5)
				dx := min(sub*0.6/float64(len(cp)), 5)
				r := min(3.5, max(sub*0.18, 1.8))
				vals := make([]float64, len(cp))
				for j, p := range cp {
					x := cx + (float64(j)-float64(len(cp)-1)/2)*dx
					sv.Marks = append(sv.Marks, markView{D: markerPath(sv.Marker, x, ysc.pos(p.y), r), Title: title(p)})
					vals[j] = p.y
				}
				my := ysc.pos(Median(vals))
				half := max(sub*0.38, 4)
				sv.Medians = append(sv.Medians, segView{c(cx - half), c(my), c(cx + half), c(my)})
			}
		case Bars:
			for _, p := range pts {
				left := x0 + band*p.x + band*0.1 + sub*float64(i) + sub*0.08
				w := sub * 0.84
				top, base := ysc.pos(p.y), ysc.pos(max(ysc.Lo, 0))
				if ysc.Log {
					base = ysc.pos(ysc.Lo)
				}
				y, h := min(top, base), math.Abs(base-top)
				m := markView{D: "M" + c(left) + " " + c(y) + "h" + c(w) + "v" + c(h) + "h" + c(-w) + "Z", Title: title(p)}
				if r := min(w*0.3, 4); h > 2*r+4 && r >= 1.5 {
					m.Inner = markerPath(sv.Marker, left+w/2, min(top, base)+r+3, r)
				}
				sv.Marks = append(sv.Marks, m)
			}
		default: // Lines
			slices.SortStableFunc(pts, func(a, b pt) int {
				if a.x < b.x {
					return -1
				}
				if a.x > b.x {
					return 1
				}
				return 0
			})
			var line []string
			for _, p := range pts {
				x, y := xsc.pos(p.x), ysc.pos(p.y)
				line = append(line, c(x)+","+c(y))
				sv.Marks = append(sv.Marks, markView{D: markerPath(sv.Marker, x, y, 3.5), Title: title(p)})
			}
			sv.Line = strings.Join(line, " ")
		}
		v.Series = append(v.Series, sv)
	}
	return v
}

// numericX is the X scale of a Lines chart: the values themselves when they
// are a few integers (CPU counts), else nice ticks.
func numericX(xs []float64, log bool) scale {
	if len(xs) == 0 {
		return linearScale(0, 1, 6, false)
	}
	distinct := slices.Compact(slices.Sorted(slices.Values(xs)))
	integers := true
	for _, x := range distinct {
		integers = integers && x == math.Trunc(x)
	}
	switch {
	case log && len(distinct) <= 12:
		// One tick per value, placed logarithmically (1, 2, 4 ... 80).
		s := scale{Lo: distinct[0], Hi: distinct[len(distinct)-1], Log: true, Ticks: distinct}
		if s.Hi == s.Lo {
			s.Hi = 2 * s.Lo
		}
		return s
	case log:
		return logScale(distinct[0], distinct[len(distinct)-1])
	case integers && len(distinct) <= 12:
		return integerScale(distinct)
	}
	return linearScale(distinct[0], distinct[len(distinct)-1], 8, false)
}

// wrap breaks s at spaces into lines of at most width characters (a longer
// word stays whole).
func wrap(s string, width int) []string {
	var lines []string
	cur := ""
	for _, w := range strings.Fields(s) {
		switch {
		case cur == "":
			cur = w
		case runes(cur)+1+runes(w) <= width:
			cur += " " + w
		default:
			lines = append(lines, cur)
			cur = w
		}
	}
	return append(lines, cur)
}

// runes is the length of s in characters.
func runes(s string) int { return utf8.RuneCountInString(s) }

// count prints n with its noun, plural when it is not one.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
