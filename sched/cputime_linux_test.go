package sched

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPUTime returns the CPU time the calling OS thread has used.
func threadCPUTime() (time.Duration, bool) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
