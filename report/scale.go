package report

import (
	"math"
	"strconv"
	"strings"
)

// Axis scales and ticks for the report's charts.

// maxPlottable bounds the values a chart draws: beyond it, differences of
// values overflow and a point could not be placed.
const maxPlottable = 1e150

// plottable reports whether v is a finite number a chart can place.
func plottable(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && math.Abs(v) <= maxPlottable
}

// scale maps a domain [Lo, Hi] onto a pixel range [P0, P1], linearly or
// logarithmically, and carries the ticks to draw.
type scale struct {
	Lo, Hi float64
	P0, P1 float64
	Log    bool
	Ticks  []float64
	// div and suffix print linear tick labels in one unit for the whole
	// axis ("k" for thousands); log labels choose per value.
	div    float64
	suffix string
	step   float64
}

// pos is the pixel position of v, which must be inside the domain's
// plottable range (positive on a log scale).
func (s *scale) pos(v float64) float64 {
	lo, hi, x := s.Lo, s.Hi, v
	if s.Log {
		lo, hi, x = math.Log10(lo), math.Log10(hi), math.Log10(v)
	}
	return s.P0 + (x-lo)/(hi-lo)*(s.P1-s.P0)
}

// label is the tick label of v.
func (s *scale) label(v float64) string {
	if v == 0 {
		return "0"
	}
	if s.Log {
		return siNumber(v)
	}
	return formatStep(v/s.div, s.step/s.div) + s.suffix
}

// linearScale returns a linear scale whose domain covers [lo, hi] with
// about n nice ticks (1, 2 or 5 times a power of ten apart). Its domain
// always contains zero when zero is true.
func linearScale(lo, hi float64, n int, zero bool) scale {
	if zero {
		lo, hi = min(lo, 0), max(hi, 0)
	}
	if lo == hi { // one value: a domain around it (with zero: [0, 1])
		d := math.Abs(lo) / 2
		if d == 0 {
			d = 0.5
		}
		lo, hi = lo-d, hi+d
		if zero {
			lo, hi = 0, 1
		}
	}
	step := niceNum((hi-lo)/float64(max(n-1, 1)), true)
	s := scale{Lo: roundTo(math.Floor(lo/step)*step, step), Hi: roundTo(math.Ceil(hi/step)*step, step), step: step, div: 1}
	for k := math.Round(s.Lo / step); k*step <= s.Hi+step/2; k++ {
		s.Ticks = append(s.Ticks, roundTo(k*step, step))
	}
	top := max(math.Abs(s.Lo), math.Abs(s.Hi))
	switch {
	case top >= 1e9:
		s.div, s.suffix = 1e9, "G"
	case top >= 1e6:
		s.div, s.suffix = 1e6, "M"
	case top >= 1e4:
		s.div, s.suffix = 1e3, "k"
	}
	return s
}

// integerScale returns a linear scale whose ticks are exactly xs, for a
// numeric axis of a few integers (CPU counts).
func integerScale(xs []float64) scale {
	lo, hi := xs[0], xs[len(xs)-1]
	pad := max((hi-lo)*0.05, 0.5)
	return scale{Lo: lo - pad, Hi: hi + pad, Ticks: xs, step: 1, div: 1}
}

// logScale returns a base-10 logarithmic scale covering [lo, hi] (both
// positive) with ticks at powers of ten, and at 2 and 5 times them when the
// domain spans few decades.
func logScale(lo, hi float64) scale {
	e0, e1 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if e0 == e1 {
		e1++
	}
	s := scale{Lo: math.Pow(10, e0), Hi: math.Pow(10, e1), Log: true}
	every := math.Ceil((e1 - e0) / 8) // at most about eight decade ticks
	for e := e0; e <= e1; e += every {
		p := math.Pow(10, e)
		s.Ticks = append(s.Ticks, p)
		if e1-e0 <= 2 && e < e1 {
			s.Ticks = append(s.Ticks, 2*p, 5*p)
		}
	}
	return s
}

// niceNum returns a number 1, 2, 5 or 10 times a power of ten near x:
// rounded when round is set, else the smallest such number at least x.
// (Heckbert's "nice numbers for graph labels", Graphics Gems, 1990.)
func niceNum(x float64, round bool) float64 {
	if x <= 0 || !plottable(x) {
		return 1
	}
	e := math.Floor(math.Log10(x))
	p := math.Pow(10, e)
	f := x / p
	var nf float64
	switch {
	case round && f < 1.5, !round && f <= 1:
		nf = 1
	case round && f < 3, !round && f <= 2:
		nf = 2
	case round && f < 7, !round && f <= 5:
		nf = 5
	default:
		nf = 10
	}
	return nf * p
}

// decimals is the number of decimals that print multiples of step exactly.
func decimals(step float64) int {
	if step <= 0 || !plottable(step) {
		return 0
	}
	return max(0, int(-math.Floor(math.Log10(step)+1e-9)))
}

// roundTo rounds v to the decimals of step, so that sums of steps print
// without binary noise (0.30000000000000004).
func roundTo(v, step float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', decimals(step), 64), 64)
	if r == 0 {
		return 0 // no "-0"
	}
	return r
}

// formatStep prints v with the decimals of step.
func formatStep(v, step float64) string {
	return strconv.FormatFloat(roundTo(v, step), 'f', decimals(step), 64)
}

// siNumber prints v shortly: "0.002", "50", "1k", "2.5M".
func siNumber(v float64) string {
	a := math.Abs(v)
	div, suffix := 1.0, ""
	switch {
	case a >= 1e9:
		div, suffix = 1e9, "G"
	case a >= 1e6:
		div, suffix = 1e6, "M"
	case a >= 1e3:
		div, suffix = 1e3, "k"
	}
	s := strconv.FormatFloat(v/div, 'g', 3, 64)
	if strings.ContainsAny(s, "e") { // below 1e-4 'g' switches to exponents
		s = strconv.FormatFloat(v/div, 'f', -1, 64)
	}
	return s + suffix
}
