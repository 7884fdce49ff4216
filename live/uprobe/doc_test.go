package uprobe

import "testing"

// Each mode's name parses back to it, "multi" is ModeMulti, and an unknown
// name is refused.
func TestModeNames(t *testing.T) {
	for _, c := range []struct {
		name string
		mode Mode
	}{{"uprobe_multi", ModeMulti}, {"multi", ModeMulti}, {"perf", ModePerf}} {
		if m, err := ParseMode(c.name); err != nil || m != c.mode {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", c.name, m, err, c.mode)
		}
	}
	if ModeMulti.String() != "uprobe_multi" || ModePerf.String() != "perf" || Mode(2).String() != "Mode(2)" {
		t.Errorf("names %q %q %q", ModeMulti, ModePerf, Mode(2))
	}
	if _, err := ParseMode("kprobe"); err == nil {
		t.Error(`ParseMode("kprobe") accepted`)
	}
}
