package forkstall

import "testing"

// forkInEveryWindow makes every window of the runs hold a fork (hooks) until
// the test ends.
func forkInEveryWindow(t interface{ Cleanup(func()) }) {
	hooks.forkInEveryWindow = true
	t.Cleanup(func() { hooks.forkInEveryWindow = false })
}

// watchProbedDirs records the directory of every run's probed copy.
func watchProbedDirs(t *testing.T) *[]string {
	var dirs []string
	hooks.probedDir = func(d string) { dirs = append(dirs, d) }
	t.Cleanup(func() { hooks.probedDir = nil })
	return &dirs
}
