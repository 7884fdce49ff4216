// Package livetest holds what the tests of the live experiments share. Only
// tests import it.
package livetest

import (
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
