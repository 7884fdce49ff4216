package reporttest

import (
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps the errors reported to it.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Error(args ...any) { r.errs = append(r.errs, fmt.Sprint(args...)) }

const goodChart = `<figure class="chart" data-chart="lines" data-points="2" data-series="1" data-empty-series="0" data-skipped="0">
<figcaption>c</figcaption>
<svg viewBox="0 0 10 10"><g class="tick"><text>0</text><text>1</text><text>2</text><text>3</text></g>
<g class="series" data-name="s"><path class="pt" d="M0 0Z"/><path class="pt" d="M1 1Z"/></g></svg>
<ul class="legend"><li>s</li><li class="ref-item">r</li></ul><p>Reproduce: <code>x</code></p></figure>`

func page(seed, table string) string {
	return `<!DOCTYPE html><html><body><section class="seed" data-seed="000"><h2>Seed 000: <i>t</i></h2>
<p class="verdict"><span>Verdict</span>v &amp; w</p>` + seed + `</section>` + table + `</body></html>`
}

func TestCheckGoodPage(t *testing.T) {
	root, err := Parse(strings.NewReader(page(goodChart, `<table><tr><th>a</th></tr><tr><td>x</td><td>1.5 ms</td></tr></table>`)))
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{TB: t}
	sum := Check(r, root)
	if len(r.errs) > 0 {
		t.Errorf("a good page: %q", r.errs)
	}
	want := Seed{ID: "000", Heading: "Seed 000: t", Verdict: "Verdictv & w", Charts: 1}
	if len(sum.Seeds) != 1 || sum.Seeds[0] != want || sum.Charts != 1 || sum.Tables != 1 {
		t.Errorf("summary %+v, want one seed %+v, one chart, one table", sum, want)
	}
}

func TestCheckFindsFaults(t *testing.T) {
	for name, tc := range map[string]struct{ seed, table, want string }{
		"NaN attribute":   {strings.Replace(goodChart, `d="M1 1Z"`, `d="MNaN 1Z"`, 1), "", "not a number"},
		"NaN text":        {goodChart + "<p>Inf ms</p>", "", "not a number"},
		"points missing":  {strings.Replace(goodChart, `<path class="pt" d="M1 1Z"/>`, "", 1), "", "1 points drawn, data-points=2"},
		"empty series":    {strings.Replace(goodChart, `data-empty-series="0"`, `data-empty-series="1"`, 1), "", "data-empty-series:1"},
		"no-data legend":  {strings.Replace(goodChart, "<li>s</li>", "<li>s (no data)</li>", 1), "", "empty series"},
		"legend missing":  {strings.Replace(goodChart, "<li>s</li>", "", 1), "", "0 legend entries, want 1"},
		"no command":      {strings.Replace(goodChart, "Reproduce:", "", 1), "", "no command"},
		"no chart":        {"", "", "no chart on the page"},
		"table no number": {goodChart, `<table><tr><td>x</td></tr></table>`, "none a number"},
	} {
		root, err := Parse(strings.NewReader(page(tc.seed, tc.table)))
		if err != nil {
			t.Fatal(err)
		}
		r := &recorder{TB: t}
		Check(r, root)
		if !strings.Contains(strings.Join(r.errs, "\n"), tc.want) {
			t.Errorf("%s: errors %q, want one with %q", name, r.errs, tc.want)
		}
	}
}
