//go:build !linux

package trigger

import "time"

// threadCPUTime is not available here: rates are given in wall time only.
func threadCPUTime() (time.Duration, bool) { return 0, false }
