// Package host is what mmlab's runners need of the host they run on and
// the model does not model, all of it about the calling OS thread: the CPUs
// it may run on (sched_getaffinity(2), sched_setaffinity(2)), its
// scheduling policy (sched_setattr(2): SCHED_FIFO, or SCHED_NORMAL at a
// nice), one nanosleep(2), its CPU-time clock (CLOCK_THREAD_CPUTIME_ID) and
// its run delay (/proc/thread-self/schedstat) and a signal to itself
// (tgkill(2)). A caller that changes its
// thread locks its goroutine to it first (runtime.LockOSThread). One more
// thing is the machine's, not the thread's: the time a hypervisor has
// taken from each CPU (Steal).
//
// The live experiments and the model's runners use it; the model packages
// do not: a real-time sched.System takes it as sched.Config.Host (Threads).
// Off Linux the functions return an error wrapping machine.ErrNotSupported,
// ThreadCPUTime reports no clock and Nanosleep is time.Sleep.
package host

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

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

// userHZ is USER_HZ, the unit of /proc/stat's times: 100 on x86
// (include/asm-generic/param.h), whatever the kernel's HZ.
const userHZ = 100

// ParseSteal reads /proc/stat's text: each CPU's steal time, the eighth
// figure of its "cpuN" line (fs/proc/stat.c:show_stat prints user, nice,
// system, idle, iowait, irq, softirq, steal, guest, guest_nice in USER_HZ
// ticks): the time a hypervisor ran something else while the CPU had work.
func ParseSteal(r io.Reader) (map[int]time.Duration, error) {
	steal := map[int]time.Duration{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		cpu, err := strconv.Atoi(f[0][3:])
		if err != nil || len(f) < 9 {
			return nil, fmt.Errorf("/proc/stat: line %q: want cpuN and at least 8 figures", sc.Text())
		}
		ticks, err := strconv.ParseInt(f[8], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("/proc/stat: %s's steal %q: %w", f[0], f[8], err)
		}
		steal[cpu] = time.Duration(ticks) * time.Second / userHZ
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(steal) == 0 {
		return nil, fmt.Errorf("/proc/stat: no cpuN line")
	}
	return steal, nil
}
