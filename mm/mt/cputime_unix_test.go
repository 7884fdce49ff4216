//go:build unix

package mt

import "syscall"

// cpuTime returns the CPU time (user+system) the process has used, in
// nanoseconds: on this noisy shared machine it shows the work a benchmark
// does even when wall-clock time is inflated by other processes.
func cpuTime() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime)
}
