package trigger

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPUTime returns the CPU time of the calling OS thread (a model
// thread is locked to one), and whether the OS gives it.
func threadCPUTime() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
