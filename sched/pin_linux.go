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

// setHostPriority gives the calling OS thread the host scheduling priority
// of model priority prio (Config.HostPriority): SCHED_FIFO at 1-prio for
// prio <= 0, else SCHED_OTHER at nice prio. On failure the thread is left
// SCHED_NORMAL (SCHED_OTHER) at nice 0 and the error returned.
func setHostPriority(prio int) error {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL, Nice: int32(min(prio, 19))}
	if prio <= 0 {
		attr = unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(min(1-prio, 99))}
	}
	err := unix.SchedSetAttr(0, &attr, 0)
	if err != nil {
		_ = unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}, 0)
	}
	return err
}
