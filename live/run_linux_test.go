package live

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// A run's name is dead once no process with its pid started at its start
// time; a name of another pid namespace, or one that does not parse, is
// never dead.
func TestDead(t *testing.T) {
	name := RunName("-")
	f := strings.Split(name, "-")
	if len(f) != 3 || f[0] != strconv.Itoa(os.Getpid()) {
		t.Fatalf("RunName = %q, want PID-START-PIDNS", name)
	}
	for _, c := range []struct {
		name string
		dead bool
	}{
		{name + "-xyz", false},
		{f[0] + "-1-" + f[2] + "-xyz", true},   // this pid, another start
		{f[0] + "-" + f[1] + "-1-xyz", false},  // another namespace
		{"x-" + f[1] + "-" + f[2], false},      // no pid
		{"mmlab", false},                       // no run name
		{strings.Join(f, "_") + "_abc", false}, // another separator
	} {
		if got := Dead(c.name, "-"); got != c.dead {
			t.Errorf("Dead(%q) = %v, want %v", c.name, got, c.dead)
		}
	}
}

// SweepRunTemp removes the directories of runs that have ended and keeps
// this run's and another prefix's.
func TestSweepRunTemp(t *testing.T) {
	base := t.TempDir()
	mine, err := MkdirRunTemp(base, "mmlab-test-")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Split(RunName("-"), "-")
	dead := base + "/mmlab-test-" + f[0] + "-1-" + f[2] + "-123"
	other := base + "/other-" + f[0] + "-1-" + f[2] + "-123"
	for _, d := range []string{dead, other} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if gone := SweepRunTemp([]string{base}, "mmlab-test-"); len(gone) != 1 || gone[0] != dead {
		t.Errorf("swept %v, want only %s", gone, dead)
	}
	for _, d := range []string{mine, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
}
