// Package host is what mmlab's runners need of the host they run on and
// the model does not model, all of it about the calling OS thread: the CPUs
// it may run on (sched_getaffinity(2), sched_setaffinity(2)), its
// scheduling policy (sched_setattr(2): SCHED_FIFO, or SCHED_NORMAL at a
// nice), one nanosleep(2), its CPU-time clock (CLOCK_THREAD_CPUTIME_ID) and
// its run delay (/proc/thread-self/schedstat) and a signal to itself
// (tgkill(2)). A caller that changes its
// thread locks its goroutine to it first (runtime.LockOSThread).
//
// The live experiments and the model's runners use it; the model packages
// do not: a real-time sched.System takes it as sched.Config.Host (Threads).
// Off Linux the functions return an error wrapping machine.ErrNotSupported,
// ThreadCPUTime reports no clock and Nanosleep is time.Sleep.
package host

import "time"

// Threads is this host as sched.Config.Host takes it: it pins a model
// CPU's OS threads to a host CPU and gives them host priorities.
type Threads struct{}

// CPUs is CPUs.
func (Threads) CPUs() ([]int, error) { return CPUs() }

// Pin is Pin.
func (Threads) Pin(cpus ...int) error { return Pin(cpus...) }

// SetFIFO is SetFIFO.
func (Threads) SetFIFO(prio int) error { return SetFIFO(prio) }

// SetNice is SetNice.
func (Threads) SetNice(nice int) error { return SetNice(nice) }

// ThreadCPUTime is ThreadCPUTime.
func (Threads) ThreadCPUTime() (time.Duration, bool) { return ThreadCPUTime() }
