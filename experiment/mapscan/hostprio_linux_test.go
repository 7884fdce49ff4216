package mapscan

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// hostCanFIFO reports whether this process may make a thread SCHED_FIFO
// (sched.Config.HostPriority's need), trying it on a thread of its own.
func hostCanFIFO() bool {
	ok := make(chan bool)
	go func() {
		runtime.LockOSThread() // the thread ends with the goroutine, its policy with it
		ok <- unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1}, 0) == nil
	}()
	return <-ok
}
