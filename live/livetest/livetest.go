// Package livetest holds what the tests of the live experiments share. Only
// tests import it.
package livetest

import (
	"errors"
	"os/exec"
	"path/filepath"
	"testing"

	"mmlab/experiment"
	"mmlab/live/uprobe"
)

// Quiet is an Env that drops progress lines.
var Quiet = experiment.Env{Progress: func(string, ...any) {}}

// Options parses args into o as the command line would
// (experiment.ParseOptions, which validates) and returns o; an error fails t.
func Options[O experiment.Options](t testing.TB, o O, args ...string) O {
	t.Helper()
	if err := experiment.ParseOptions(o, args...); err != nil {
		t.Fatal(err)
	}
	return o
}

// NeedUprobes skips t unless live uprobes can be used here
// (uprobe.Supported: Linux, root and the x86-64 targets).
func NeedUprobes(t testing.TB) {
	t.Helper()
	if err := uprobe.Supported(); err != nil {
		t.Skip(err)
	}
}

// BuildC compiles the C program src (a path relative to the test's
// directory) with the first of cc, gcc and clang in PATH and the flags,
// into the test's temporary directory, and returns the binary's path; it
// skips t if there is no C compiler and fails it if the build fails.
func BuildC(t testing.TB, src string, flags ...string) string {
	t.Helper()
	for _, c := range []string{"cc", "gcc", "clang"} {
		cc, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		bin := filepath.Join(t.TempDir(), filepath.Base(src[:len(src)-len(filepath.Ext(src))]))
		if out, err := exec.Command(cc, append(append(flags, "-o", bin), src)...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", cc, err, out)
		}
		return bin
	}
	t.Skip("no C compiler (cc, gcc or clang) in PATH")
	return ""
}

// Run runs the program bin with args and returns its combined output and
// exit status; a failure to run it fails t.
func Run(t testing.TB, bin string, args ...string) ([]byte, int) {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out, ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return out, 0
}
