//go:build !linux

package rcu

import "time"

// threadCPUTime is not available outside Linux.
func threadCPUTime() (time.Duration, bool) { return 0, false }
