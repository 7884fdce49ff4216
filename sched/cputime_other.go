//go:build !linux

package sched

import "time"

// hostThreadCPUTime is not available here: callers fall back to wall time.
func hostThreadCPUTime() (time.Duration, bool) { return 0, false }
