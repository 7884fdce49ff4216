//go:build !linux

package sched

import "time"

// threadCPUTime is not available outside Linux.
func threadCPUTime() (time.Duration, bool) { return 0, false }
