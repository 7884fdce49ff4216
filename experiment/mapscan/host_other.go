//go:build !linux

package mapscan

import "time"

// nanosleep is time.Sleep outside Linux.
func nanosleep(d time.Duration) { time.Sleep(d) }

// hostWaitClock is not available outside Linux: openHostWaitClock returns
// nil, and the mapper's timings include its waits for a host CPU.
type hostWaitClock struct{}

func openHostWaitClock() *hostWaitClock { return nil }

func (*hostWaitClock) read() (time.Duration, bool) { return 0, false }

func (*hostWaitClock) close() {}
