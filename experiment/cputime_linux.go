package experiment

import (
	"time"

	"golang.org/x/sys/unix"
)

// ThreadCPUTime returns the CPU time (user and system) of the calling OS
// thread, and whether the OS gives it: the clock of a run on a locked
// thread that a loaded machine distorts least.
func ThreadCPUTime() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
