package sched

import (
	"time"

	"golang.org/x/sys/unix"
)

// hostThreadCPUTime returns the CPU time (user and system) of the calling OS
// thread (CLOCK_THREAD_CPUTIME_ID), and whether the OS gives it: the clock
// of a benchmark or a run on a locked thread, such as a model CPU's, that a
// loaded machine distorts least.
func hostThreadCPUTime() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
