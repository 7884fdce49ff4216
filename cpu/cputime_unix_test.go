//go:build unix

package cpu

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time this process used so far (user + system), which
// benchmarks report beside wall time on a machine shared with other work.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
