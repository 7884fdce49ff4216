//go:build !linux

package mapscan

import "time"

// Nanosleep is time.Sleep outside Linux.
func Nanosleep(d time.Duration) { time.Sleep(d) }

// hostWaitClock is not available outside Linux: openHostWaitClock returns
// nil, and the mapper's timings include its waits for a host CPU.
type hostWaitClock struct{}

func openHostWaitClock() *hostWaitClock { return nil }

func (*hostWaitClock) read() (time.Duration, bool) { return 0, false }

func (*hostWaitClock) close() {}
