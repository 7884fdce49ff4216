package sched

import (
	"os"

	"golang.org/x/sys/unix"
)

// hostCPUs returns the host CPUs the process may run on, in order.
func hostCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(os.Getpid(), &set); err != nil {
		return nil
	}
	var cpus []int
	for i := 0; i < len(set)*64 && len(cpus) < set.Count(); i++ {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus
}

// pin binds the calling OS thread to host CPU cpu. The caller has locked its
// goroutine to the OS thread.
func pin(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	return unix.SchedSetaffinity(0, &set)
}
