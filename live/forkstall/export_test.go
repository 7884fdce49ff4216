package forkstall

// forkInEveryWindow makes every window of the runs hold a fork (hooks) until
// the test ends.
func forkInEveryWindow(t interface{ Cleanup(func()) }) {
	hooks.forkInEveryWindow = true
	t.Cleanup(func() { hooks.forkInEveryWindow = false })
}
