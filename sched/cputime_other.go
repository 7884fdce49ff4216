//go:build !linux

package sched

import "time"

// ThreadCPUTime is not available here: callers fall back to wall time.
func ThreadCPUTime() (time.Duration, bool) { return 0, false }
