package mapscan

import (
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Nanosleep sleeps d in one nanosleep(2) of the calling OS thread, as
// mapper.c and busywait.c sleep: d plus the thread's timer slack, where
// Go's time.Sleep rounds sleeps under a millisecond up to about one. The
// model's mapper and busy-waiters sleep so, and the live helpers.
func Nanosleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}

// hostWaitClock reads how long the calling OS thread has waited for a host
// CPU while runnable: the second field of /proc/thread-self/schedstat
// (run_delay, nanoseconds).
type hostWaitClock struct {
	f   *os.File
	buf [96]byte
}

// openHostWaitClock opens the clock of the calling OS thread, which must be
// locked to its goroutine (a model thread is); nil if the kernel does not
// give it.
func openHostWaitClock() *hostWaitClock {
	f, err := os.Open("/proc/thread-self/schedstat")
	if err != nil {
		return nil
	}
	c := &hostWaitClock{f: f}
	if _, ok := c.read(); !ok {
		f.Close()
		return nil
	}
	return c
}

// read returns the thread's run_delay so far; false from a nil clock.
func (c *hostWaitClock) read() (time.Duration, bool) {
	if c == nil {
		return 0, false
	}
	n, err := c.f.ReadAt(c.buf[:], 0)
	if n == 0 && err != nil {
		return 0, false
	}
	fields := strings.Fields(string(c.buf[:n]))
	if len(fields) < 2 {
		return 0, false
	}
	ns, err := strconv.ParseInt(fields[1], 10, 64)
	return time.Duration(ns), err == nil
}

func (c *hostWaitClock) close() {
	if c != nil {
		c.f.Close()
	}
}
