package host

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// CPUs returns the CPUs the calling OS thread may run on, in order
// (sched_getaffinity(2)): the process's, unless the thread was pinned.
func CPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, os.NewSyscallError("sched_getaffinity", err)
	}
	var cpus []int
	for c := 0; c < len(set)*64 && len(cpus) < set.Count(); c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// Pin binds the calling OS thread to the CPUs cpus (sched_setaffinity(2)).
func Pin(cpus ...int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("sched_setaffinity to CPUs %v: %w", cpus, err)
	}
	return nil
}

// IdleOtherThreads makes every thread of this process but the calling one
// SCHED_IDLE (sched_setattr(2)): it sets each thread /proc/self/task lists,
// then lists them again until no thread is new (one created meanwhile
// inherits its creator's policy, which may have been set after it was
// created). A SCHED_IDLE thread never preempts a normal one on waking
// (check_preempt_wakeup_fair()) and weighs 3 against nice 0's 1024.
func IdleOtherThreads() error {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}
	done := map[int]bool{unix.Gettid(): true}
	for {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		fresh := false
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			fresh, done[tid] = true, true
			if err := unix.SchedSetAttr(tid, &attr, 0); err != nil && err != unix.ESRCH { // ESRCH: it exited
				return fmt.Errorf("sched_setattr of thread %d to SCHED_IDLE: %w", tid, err)
			}
		}
		if !fresh {
			return nil
		}
	}
}

// SetFIFO makes the calling OS thread SCHED_FIFO at real-time priority
// prio, 1 to 99 (sched_setattr(2); needs CAP_SYS_NICE).
func SetFIFO(prio int) error {
	return setAttr(unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: uint32(prio)}, "SCHED_FIFO", prio)
}

// SetNice makes the calling OS thread SCHED_NORMAL (SCHED_OTHER) at nice
// nice, -20 to 19 (sched_setattr(2); a nice below the thread's needs
// CAP_SYS_NICE).
func SetNice(nice int) error {
	return setAttr(unix.SchedAttr{Policy: unix.SCHED_NORMAL, Nice: int32(nice)}, "nice", nice)
}

func setAttr(attr unix.SchedAttr, what string, n int) error {
	attr.Size = unix.SizeofSchedAttr
	if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
		return fmt.Errorf("sched_setattr %s %d: %w", what, n, err)
	}
	return nil
}

// SetTimerSlack sets the calling OS thread's timer slack, how late the
// kernel may let its sleeps end to batch timer interrupts
// (prctl(PR_SET_TIMERSLACK); 50 µs by default for SCHED_NORMAL threads),
// to d, at least 1 ns (0 would restore the default).
func SetTimerSlack(d time.Duration) error {
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(max(d, 1)), 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_TIMERSLACK %v: %w", d, err)
	}
	return nil
}

// Nanosleep sleeps d in one nanosleep(2) of the calling OS thread, as
// mapper.c and busywait.c of proc-mmap_sem-test sleep: d plus the thread's
// timer slack, where Go's time.Sleep rounds sleeps under a millisecond up
// to about one. A signal does not end the sleep early.
func Nanosleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}

// SignalThread sends sig to the calling OS thread (tgkill(2)). The kernel
// hands a thread the signals directed at it before those pending for the
// whole process, and both before the system call returns.
func SignalThread(sig unix.Signal) error {
	if err := unix.Tgkill(unix.Getpid(), unix.Gettid(), sig); err != nil {
		return os.NewSyscallError("tgkill", err)
	}
	return nil
}

// ThreadCPUTime returns the CPU time (user and system) of the calling OS
// thread (CLOCK_THREAD_CPUTIME_ID), and whether the OS gives it: the clock
// of a benchmark or a run on a locked thread, such as a model CPU's, that a
// loaded machine distorts least.
func ThreadCPUTime() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}

// RunDelay is the clock of how long one OS thread has waited for a CPU
// while runnable: run_delay, the second field of its
// /proc/thread-self/schedstat (fs/proc/base.c:proc_pid_schedstat prints
// se.sum_exec_runtime, sched_info.run_delay and sched_info.pcount), in
// nanoseconds.
type RunDelay struct {
	f   *os.File
	buf [96]byte
}

// OpenRunDelay opens the clock of the calling OS thread, which must stay
// locked to its goroutine while the clock is read.
func OpenRunDelay() (*RunDelay, error) {
	f, err := os.Open("/proc/thread-self/schedstat")
	if err != nil {
		return nil, err
	}
	c := &RunDelay{f: f}
	if _, ok := c.Read(); !ok {
		f.Close()
		return nil, fmt.Errorf("%s: no run_delay", f.Name())
	}
	return c, nil
}

// Read returns the thread's run_delay so far; false from a nil clock.
func (c *RunDelay) Read() (time.Duration, bool) {
	if c == nil {
		return 0, false
	}
	n, err := c.f.ReadAt(c.buf[:], 0)
	if n == 0 && err != nil {
		return 0, false
	}
	fields := strings.Fields(string(c.buf[:n]))
	if len(fields) < 2 {
		return 0, false
	}
	ns, err := strconv.ParseInt(fields[1], 10, 64)
	return time.Duration(ns), err == nil
}

// Close closes the clock; a nil clock has nothing to close.
func (c *RunDelay) Close() error {
	if c == nil {
		return nil
	}
	return c.f.Close()
}

// Steal returns each CPU's steal time so far (ParseSteal of /proc/stat).
func Steal() (map[int]time.Duration, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseSteal(f)
}
