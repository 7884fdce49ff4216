package report

import (
	"math"
	"slices"
	"testing"
)

func TestNiceNum(t *testing.T) {
	for _, tc := range []struct {
		x     float64
		round bool
		want  float64
	}{
		{0.84e6, true, 1e6}, {1.4, true, 1}, {2.9, true, 2}, {3.1, true, 5}, {7.2, true, 10},
		{0.065, true, 0.05}, {0.07, true, 0.1}, {1.01, false, 2}, {2, false, 2}, {4.9, false, 5}, {5.1, false, 10},
		{0, true, 1}, {math.NaN(), true, 1},
	} {
		if got := niceNum(tc.x, tc.round); math.Abs(got-tc.want) > 1e-12*tc.want {
			t.Errorf("niceNum(%v, %v) = %v, want %v", tc.x, tc.round, got, tc.want)
		}
	}
}

func labels(s scale) []string {
	var out []string
	for _, v := range s.Ticks {
		out = append(out, s.label(v))
	}
	return out
}

func TestLinearScale(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		zero   bool
		want   []string
	}{
		{0, 9.3, true, []string{"0", "2", "4", "6", "8", "10"}},
		{3, 9.3, true, []string{"0", "2", "4", "6", "8", "10"}},
		{3, 9.3, false, []string{"3", "4", "5", "6", "7", "8", "9", "10"}},
		{0.1, 0.37, true, []string{"0", "0.1", "0.2", "0.3", "0.4"}},
		{0.1, 0.3, true, []string{"0", "0.05", "0.10", "0.15", "0.20", "0.25", "0.30"}},
		{-3, 7, true, []string{"-4", "-2", "0", "2", "4", "6", "8"}},
		{0, 4.2e6, true, []string{"0", "1M", "2M", "3M", "4M", "5M"}},
		{0, 25000, true, []string{"0", "5k", "10k", "15k", "20k", "25k"}},
		{0, 0, true, []string{"0", "0.2", "0.4", "0.6", "0.8", "1.0"}},
		{0, 1.5e6, true, []string{"0", "0.5M", "1.0M", "1.5M"}},
		{5, 5, false, []string{"2", "3", "4", "5", "6", "7", "8"}},
	} {
		s := linearScale(tc.lo, tc.hi, 6, tc.zero)
		if got := labels(s); !slices.Equal(got, tc.want) {
			t.Errorf("linearScale(%v, %v, zero=%v) ticks %q, want %q", tc.lo, tc.hi, tc.zero, got, tc.want)
		}
		if s.Lo > tc.lo || s.Hi < tc.hi || s.Lo != s.Ticks[0] || s.Hi != s.Ticks[len(s.Ticks)-1] {
			t.Errorf("linearScale(%v, %v): domain [%v, %v], ticks %v", tc.lo, tc.hi, s.Lo, s.Hi, s.Ticks)
		}
		s.P0, s.P1 = 100, 0
		if s.pos(s.Lo) != 100 || s.pos(s.Hi) != 0 {
			t.Errorf("linearScale(%v, %v): domain ends at %v and %v, want 100 and 0", tc.lo, tc.hi, s.pos(s.Lo), s.pos(s.Hi))
		}
	}
}

func TestLogScale(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   []string
	}{
		{1.3, 420, []string{"1", "10", "100", "1k"}},
		{3, 40, []string{"1", "2", "5", "10", "20", "50", "100"}},
		{10, 10, []string{"10", "20", "50", "100"}},
		{0.002, 0.04, []string{"0.001", "0.002", "0.005", "0.01", "0.02", "0.05", "0.1"}},
		{2e-5, 3e9, []string{"0.00001", "0.001", "0.1", "10", "1k", "100k", "10M", "1G"}},
		{2.5e6, 9e6, []string{"1M", "2M", "5M", "10M"}},
	} {
		s := logScale(tc.lo, tc.hi)
		if got := labels(s); !slices.Equal(got, tc.want) {
			t.Errorf("logScale(%v, %v) ticks %q, want %q", tc.lo, tc.hi, got, tc.want)
		}
		if s.Lo > tc.lo || s.Hi < tc.hi {
			t.Errorf("logScale(%v, %v): domain [%v, %v]", tc.lo, tc.hi, s.Lo, s.Hi)
		}
	}
	s := logScale(1, 100)
	s.P0, s.P1 = 0, 200
	if got := s.pos(10); math.Abs(got-100) > 1e-9 {
		t.Errorf("log pos(10) on [1, 100] = %v, want 100", got)
	}
}

func TestNumericX(t *testing.T) {
	s := numericX([]float64{4, 1, 2, 2, 8}, false)
	if !slices.Equal(s.Ticks, []float64{1, 2, 4, 8}) || s.Lo >= 1 || s.Hi <= 8 {
		t.Errorf("a few CPU counts: ticks %v, domain [%v, %v]", s.Ticks, s.Lo, s.Hi)
	}
	if s := numericX([]float64{0.5, 3.7}, false); s.Ticks[0] > 0.5 || s.Ticks[len(s.Ticks)-1] < 3.7 || len(s.Ticks) < 3 {
		t.Errorf("fractions: ticks %v", s.Ticks)
	}
}

func TestWrap(t *testing.T) {
	if got := wrap("busy-forks multi-1 long", 12); !slices.Equal(got, []string{"busy-forks", "multi-1 long"}) {
		t.Errorf("wrap = %q", got)
	}
	if got := wrap("averyveryverylongword", 5); !slices.Equal(got, []string{"averyveryverylongword"}) {
		t.Errorf("wrap = %q", got)
	}
}
