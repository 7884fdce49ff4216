package experiment

import (
	"runtime"
	"runtime/debug"
)

// QuietRuntime keeps Go's runtime out of a model run's timings and returns
// the undo: garbage collection off (but for memLimit bytes), and
// GOMAXPROCS at least 8, above the number of model threads that run at
// once, so that a woken model thread runs when the host schedules its OS
// thread rather than when Go preempts a busy goroutine, up to 10 ms later.
func QuietRuntime(memLimit int64) func() {
	pct := debug.SetGCPercent(-1)
	lim := debug.SetMemoryLimit(memLimit)
	procs := runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 8))
	runtime.GC()
	return func() {
		runtime.GOMAXPROCS(procs)
		debug.SetMemoryLimit(lim)
		debug.SetGCPercent(pct)
	}
}
