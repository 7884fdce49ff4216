package procfs

// SetBrokenSkip sets the walk's skip hook (see hooks) until the returned
// function is called.
func SetBrokenSkip(skip func(start uint64, query bool) bool) (restore func()) {
	hooks.brokenSkip = skip
	return func() { hooks.brokenSkip = nil }
}
