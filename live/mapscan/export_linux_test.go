package mapscan

// onTraceStarted sets the hook runOnce calls once its helpers are ready and
// its trace is set up; the returned function removes it.
func onTraceStarted(f func()) func() {
	hooks.traceStarted = f
	return func() { hooks.traceStarted = nil }
}
