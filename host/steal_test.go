package host

import (
	"strings"
	"testing"
	"time"
)

// A /proc/stat of this project's 2-CPU KVM guest: each CPU's eighth figure
// is its steal, in USER_HZ ticks; the summary line and the others are not
// a CPU's.
func TestParseSteal(t *testing.T) {
	const stat = `cpu  711381 4303 239644 946112 2941 0 7662 20929 0 0
cpu0 334375 638 141743 471579 747 0 2698 9966 0 0
cpu1 377006 3665 97901 474533 2194 0 4964 10963 0 0
intr 43563614 22 9 0 0 0 0 0 0 0 0 0 0 0
ctxt 73411246
btime 1764779000
`
	got, err := ParseSteal(strings.NewReader(stat))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != 99660*time.Millisecond || got[1] != 109630*time.Millisecond {
		t.Errorf("steal %v, want CPU 0 99.66 s and CPU 1 109.63 s", got)
	}
	for _, bad := range []string{"cpu0 1 2 3\n", "cpu0 1 2 3 4 5 6 7 x 0 0\n", "intr 1 2\n", ""} {
		if s, err := ParseSteal(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: %v, want an error", bad, s)
		}
	}
}
