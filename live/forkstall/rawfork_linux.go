package forkstall

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// rawFork is a real fork(2) (clone with SIGCHLD only, so the child gets a
// copy of the address space through dup_mmap, unlike os/exec's vfork-style
// clone, which shares it and would never meet dup_mmap_sem). The child runs
// no Go code: it either exits at once or, with pause set, arranges to die
// with its parent and sleeps until killed. Only nosplit code and raw system
// calls run in the child, as in syscall.forkAndExecInChild1.
//
//go:nosplit
//go:norace
func rawFork(pause bool) (pid int, err syscall.Errno) {
	parent, _, _ := syscall.RawSyscall(syscall.SYS_GETPID, 0, 0, 0)
	r, _, e := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	if r != 0 {
		return int(r), 0
	}
	// Child.
	if pause {
		syscall.RawSyscall(syscall.SYS_PRCTL, unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0)
		// A parent that died before the prctl sent no signal.
		if ppid, _, _ := syscall.RawSyscall(syscall.SYS_GETPPID, 0, 0, 0); ppid != parent {
			syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
		}
		for {
			syscall.RawSyscall(syscall.SYS_PAUSE, 0, 0, 0)
		}
	}
	for {
		syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
	}
}

// monotonicNs reads CLOCK_MONOTONIC, the clock every process of the
// experiment stamps its events with.
func monotonicNs() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}
