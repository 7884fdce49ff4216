package calibrate

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"mmlab/host"
	"mmlab/live"
	"mmlab/machine"
)

// onCPU runs f on a new OS thread pinned to cpu and returns its result. The
// thread stays locked to its goroutine, so that it exits with it instead
// of going back to the runtime with its affinity and policy changed.
func onCPU(cpu int, f func() (float64, error)) (float64, error) {
	type result struct {
		v   float64
		err error
	}
	c := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if err := pin(cpu); err != nil {
			c <- result{err: err}
			return
		}
		v, err := f()
		c <- result{v, err}
	}()
	r := <-c
	return r.v, r.err
}

// fifoPriority is the SCHED_FIFO priority of the measuring threads: above
// every fair-class task, so that what a run times is the primitive and not
// the wait behind the host's other work; the lowest, under every kernel
// thread of the real-time class. The kernel's real-time throttling
// (sched_rt_runtime_us) leaves the fair class its share if a run spins
// long.
const fifoPriority = 1

// pin sets the calling thread's affinity to cpu alone and its policy to
// SCHED_FIFO (left as it was where that fails: the run then also times
// the waits behind other tasks).
func pin(cpu int) error {
	if err := host.Pin(cpu); err != nil {
		return err
	}
	if err := host.SetFIFO(fifoPriority); err != nil {
		fifoErr.CompareAndSwap(nil, &err)
	}
	return nil
}

// fifoErr is the first failure to set SCHED_FIFO, nil while none.
var fifoErr atomic.Pointer[error]

// AllowedCPUs lists the CPUs this process may run on.
func AllowedCPUs() ([]int, error) { return host.CPUs() }

// batches is how many timed batches make one run: a run's figure is its
// median batch, so that a batch the host interrupted (an interrupt, a
// hypervisor's steal) does not move it.
const batches = 15

// batched times batches batches of n operations by op, and returns the
// median batch's nanoseconds per operation (per op ops of each call, for
// an op that does several).
func batched(n, per int, op func(n int) (time.Duration, error)) (float64, error) {
	var ns []float64
	for range batches {
		d, err := op(n)
		if err != nil {
			return 0, err
		}
		ns = append(ns, perOp(d, n*per))
	}
	return Summarize("", "", ns).Median, nil
}

// Syscall measures getppid(2) by a raw syscall on cpu: a null system
// call's round trip with this kernel's entry and exit mitigations.
func Syscall(ctx context.Context, o Options, cpu int) ([]float64, error) {
	n := o.count(10_000)
	return repeat(ctx, o.Runs, func() (float64, error) {
		return onCPU(cpu, func() (float64, error) {
			return batched(n, 1, func(n int) (time.Duration, error) {
				start := time.Now()
				for range n {
					unix.RawSyscallNoError(unix.SYS_GETPPID, 0, 0, 0)
				}
				return time.Since(start), nil
			})
		})
	})
}

// atFDCWD is AT_FDCWD as a variable, which converts to uintptr where the
// negative constant does not.
var atFDCWD = unix.AT_FDCWD

// openNull opens /dev/null O_RDONLY by a raw openat(2) and returns the
// descriptor or the errno (openNullError names it). Small enough to be
// inlined into the timed loops.
func openNull() (uintptr, unix.Errno) {
	fd, _, e := unix.RawSyscall6(unix.SYS_OPENAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(unsafe.StringData("/dev/null\x00"))), unix.O_RDONLY, 0, 0, 0)
	return fd, e
}

// openNullError is openNull's errno as an error.
func openNullError(e unix.Errno) error { return fmt.Errorf("openat /dev/null: %w", e) }

// OpenClose measures openat(2) of /dev/null (O_RDONLY) then close(2), by
// raw syscalls on cpu: the declared point that KernelInstruction is fitted
// to.
func OpenClose(ctx context.Context, o Options, cpu int) ([]float64, error) {
	n := o.count(2_000)
	return repeat(ctx, o.Runs, func() (float64, error) {
		return onCPU(cpu, func() (float64, error) {
			return batched(n, 1, func(n int) (time.Duration, error) {
				start := time.Now()
				for range n {
					fd, e := openNull()
					if e != 0 {
						return 0, openNullError(e)
					}
					unix.RawSyscallNoError(unix.SYS_CLOSE, fd, 0, 0)
				}
				return time.Since(start), nil
			})
		})
	})
}

// idleLengths are the idle lengths AfterIdle measures after, from a
// fraction of a tick to four ticks at HZ 250.
var idleLengths = []time.Duration{50 * time.Microsecond, 250 * time.Microsecond, time.Millisecond, 4 * time.Millisecond, 16 * time.Millisecond}

// idleBudget is about how long one run of AfterIdle sleeps in all.
const idleBudget = 100 * time.Millisecond

// AfterIdle measures openat(2) of /dev/null (O_RDONLY), timed alone by a
// raw syscall on cpu, right after a nanosleep(2) of idle (back to back for
// 0), each close(2) untimed: a run's figure is the median of its openats.
// At SCHED_FIFO a sleep has no timer slack, so the CPU is idle that long
// unless another task runs there meanwhile.
func AfterIdle(ctx context.Context, o Options, cpu int, idle time.Duration) ([]float64, error) {
	n := o.count(2_000)
	if idle > 0 {
		n = max(o.count(int(idleBudget/idle)), 5)
	}
	ts := unix.NsecToTimespec(int64(idle))
	return repeat(ctx, o.Runs, func() (float64, error) {
		return onCPU(cpu, func() (float64, error) {
			ns := make([]float64, n)
			for i := range ns {
				if idle > 0 {
					unix.Nanosleep(&ts, nil) // EINTR: a shorter idle
				}
				start := time.Now()
				fd, e := openNull()
				ns[i] = float64(time.Since(start).Nanoseconds())
				if e != 0 {
					return 0, openNullError(e)
				}
				unix.RawSyscallNoError(unix.SYS_CLOSE, fd, 0, 0)
			}
			return Summarize("", "", ns).Median, nil
		})
	})
}

// openCloseInstructions is what OpenClose's pair runs in the kernel beyond
// its two entries and exits: 5,484.6 instructions per pair less two
// getpid(2) round trips of 284.3, on Debian's 6.18.15 cloud kernel booted
// with lsm=lockdown,capability,landlock,bpf, counted by docs/repro/kernel-instructions.sh as package uprobes' hit
// counts are (QEMU TCG, -icount shift=0).
const openCloseInstructions = 4916

// LockedRMW measures an uncontended LOCK XADD (atomic.Int64.Add on amd64)
// on a line in the CPU's cache, on cpu; the loop's own compare and branch
// are in it.
func LockedRMW(ctx context.Context, o Options, cpu int) ([]float64, error) {
	n := o.count(200_000)
	return repeat(ctx, o.Runs, func() (float64, error) {
		return onCPU(cpu, func() (float64, error) {
			var x atomic.Int64
			return batched(n, 1, func(n int) (time.Duration, error) {
				x.Store(0)
				start := time.Now()
				for range n {
					x.Add(1)
				}
				d := time.Since(start)
				if x.Load() != int64(n) {
					return 0, fmt.Errorf("locked add counted %d of %d", x.Load(), n)
				}
				return d, nil
			})
		})
	})
}

// PipeHandoff measures one hand-off between two threads pinned to a and b
// that pass a byte back and forth through two pipes: half a round trip,
// each half one write, one read, and the wake-up of the reader (a context
// switch when a == b, a cross-CPU wake-up otherwise), as perf bench sched
// pipe counts it.
func PipeHandoff(ctx context.Context, o Options, a, b int) ([]float64, error) {
	n := o.count(1000)
	return repeat(ctx, o.Runs, func() (float64, error) { return pipeRun(a, b, n) })
}

func pipeRun(a, b, n int) (float64, error) {
	var ping, pong [2]int
	if err := unix.Pipe2(ping[:], unix.O_CLOEXEC); err != nil {
		return 0, err
	}
	if err := unix.Pipe2(pong[:], unix.O_CLOEXEC); err != nil {
		unix.Close(ping[0])
		unix.Close(ping[1])
		return 0, err
	}
	echoed := make(chan error, 1)
	go func() {
		_, err := onCPU(b, func() (float64, error) {
			buf := make([]byte, 1)
			for range batches * n {
				if k, err := unix.Read(ping[0], buf); k != 1 {
					return 0, fmt.Errorf("echo read: %d, %v", k, err)
				}
				if _, err := unix.Write(pong[1], buf); err != nil {
					return 0, err
				}
			}
			return 0, nil
		})
		echoed <- err
	}()
	v, err := onCPU(a, func() (float64, error) {
		buf := []byte{1}
		return batched(n, 2, func(n int) (time.Duration, error) {
			start := time.Now()
			for range n {
				if _, err := unix.Write(ping[1], buf); err != nil {
					return 0, err
				}
				if k, err := unix.Read(pong[0], buf); k != 1 {
					return 0, fmt.Errorf("read: %d, %v", k, err)
				}
			}
			return time.Since(start), nil
		})
	})
	unix.Close(ping[1]) // the echo thread, if still reading, reads EOF
	echoErr := <-echoed
	for _, fd := range []int{ping[0], pong[0], pong[1]} {
		unix.Close(fd)
	}
	if err == nil {
		err = echoErr
	}
	return v, err
}

// membarrier(2) commands (include/uapi/linux/membarrier.h).
const (
	membarrierPrivateExpedited         = 1 << 3
	membarrierRegisterPrivateExpedited = 1 << 4
)

// Membarrier measures membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) on CPU a
// while a thread of this process keeps CPU b busy: a system call that sends
// an IPI to every other CPU running this process (b, and any CPU where
// another of the Go runtime's threads happens to run) and waits for each to
// run its handler. Less a syscall, it is an IPI's round trip.
//
// The busy thread reads /dev/zero into a large buffer, read after read:
// inside read(2) it stays the CPU's current task, so every membarrier has
// an IPI to send, while a spin in Go code would be preempted by the Go
// scheduler every 10 ms, and its locked thread would sleep until a P
// comes back to it: batches with no IPI at all.
func Membarrier(ctx context.Context, o Options, a, b int) ([]float64, error) {
	if _, _, e := unix.Syscall(unix.SYS_MEMBARRIER, membarrierRegisterPrivateExpedited, 0, 0); e != 0 {
		return nil, live.UnsupportedSince("4.14", "membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED): %v", e)
	}
	zero, err := unix.Open("/dev/zero", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(zero)
	buf := make([]byte, 16<<20)
	for i := 0; i < len(buf); i += pageSize {
		buf[i] = 1
	}
	n := o.count(300)
	return repeat(ctx, o.Runs, func() (float64, error) {
		var stop, busy atomic.Bool
		return beside(a, b, busy.Load, &stop, func() (float64, error) {
			busy.Store(true)
			for !stop.Load() {
				if _, err := unix.Read(zero, buf); err != nil && err != unix.EINTR {
					return 0, err
				}
			}
			return 0, nil
		}, func() (float64, error) {
			return batched(n, 1, func(n int) (time.Duration, error) {
				start := time.Now()
				for range n {
					if _, _, e := unix.RawSyscall(unix.SYS_MEMBARRIER, membarrierPrivateExpedited, 0, 0); e != 0 {
						return 0, fmt.Errorf("membarrier: %v", e)
					}
				}
				return time.Since(start), nil
			})
		})
	})
}

// beside runs partner on a thread pinned to CPU b and timed on one pinned
// to CPU a, once started reports partner under way (timed is skipped, its
// figure 0, if stop is set first: partner failed), and returns timed's
// figure and the first error, timed's before partner's. stop is set when
// partner fails and once timed returns: it ends partner's loop.
func beside(a, b int, started func() bool, stop *atomic.Bool, partner, timed func() (float64, error)) (float64, error) {
	done := make(chan error, 1)
	go func() {
		_, err := onCPU(b, partner)
		if err != nil {
			stop.Store(true)
		}
		done <- err
	}()
	v, err := onCPU(a, func() (float64, error) {
		for !started() {
			if stop.Load() {
				return 0, nil
			}
			time.Sleep(time.Millisecond)
		}
		return timed()
	})
	stop.Store(true)
	if partnerErr := <-done; err == nil {
		err = partnerErr
	}
	return v, err
}

// pageSize is the base page.
var pageSize = os.Getpagesize()

// thpAlways reports whether transparent huge pages are "always" on
// (/sys/kernel/mm/transparent_hugepage/enabled), which would populate an
// aligned anonymous range with 2 MiB pages.
func thpAlways() bool {
	b, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	return strings.Contains(string(b), "[always]")
}

// smallPages maps size bytes of anonymous private read-write memory that
// faults in 4 KiB pages (madvise(MADV_NOHUGEPAGE)); the caller unmaps it.
func smallPages(size int) ([]byte, error) {
	m, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	if err := unix.Madvise(m, unix.MADV_NOHUGEPAGE); err != nil {
		unix.Munmap(m)
		return nil, err
	}
	return m, nil
}

// populatePages is the pages of one timed populate or fault batch.
const populatePages = 1024

// Populate measures populating an anonymous private mapping of 4 KiB
// pages on cpu, per page: mmap(MAP_POPULATE) where transparent huge pages
// are not always on; where they are, mmap without it,
// madvise(MADV_NOHUGEPAGE) and madvise(MADV_POPULATE_WRITE), the same
// __get_user_pages loop with 4 KiB pages. The munmap is not timed.
func Populate(ctx context.Context, o Options, cpu int) ([]float64, error) {
	always := thpAlways()
	return perPage(ctx, o, cpu, func(n int) (time.Duration, error) {
		size := n * pageSize
		if !always {
			start := time.Now()
			m, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
			d := time.Since(start)
			if err != nil {
				return 0, err
			}
			return d, unix.Munmap(m)
		}
		m, d, err := populatedSmallPages(size)
		if err != nil {
			return 0, err
		}
		return d, unix.Munmap(m)
	})
}

// perPage runs op's batches of populatePages (scaled) pages on cpu, runs
// times, and returns each run's time per page.
func perPage(ctx context.Context, o Options, cpu int, op func(pages int) (time.Duration, error)) ([]float64, error) {
	n := o.count(populatePages)
	return repeat(ctx, o.Runs, func() (float64, error) {
		return onCPU(cpu, func() (float64, error) { return batched(n, 1, op) })
	})
}

// populatedSmallPages maps size bytes with smallPages and populates them
// for writing (madvise(MADV_POPULATE_WRITE): __get_user_pages over 4 KiB
// pages), returning the mapping and how long the populate took; the
// caller unmaps it.
func populatedSmallPages(size int) ([]byte, time.Duration, error) {
	m, err := smallPages(size)
	if err != nil {
		return nil, 0, err
	}
	start := time.Now()
	if err := unix.Madvise(m, unix.MADV_POPULATE_WRITE); err != nil {
		unix.Munmap(m)
		return nil, 0, fmt.Errorf("madvise(MADV_POPULATE_WRITE): %w", err)
	}
	return m, time.Since(start), nil
}

// Zap measures unmapping an anonymous private mapping of populated 4 KiB
// pages (MADV_NOHUGEPAGE, MADV_POPULATE_WRITE, untimed) on cpu, per page:
// the munmap(2), whose zap_pte_range() clears each PTE and frees each
// page, its fixed work spread over the batch's pages.
func Zap(ctx context.Context, o Options, cpu int) ([]float64, error) {
	return perPage(ctx, o, cpu, func(n int) (time.Duration, error) {
		m, _, err := populatedSmallPages(n * pageSize)
		if err != nil {
			return 0, err
		}
		start := time.Now()
		err = unix.Munmap(m)
		return time.Since(start), err
	})
}

// PageFault measures first-touch write faults on an anonymous private
// mapping of 4 KiB pages (MADV_NOHUGEPAGE) on cpu, per page: the
// exception, the page's allocation and zeroing, the PTE, and the return.
func PageFault(ctx context.Context, o Options, cpu int) ([]float64, error) {
	return perPage(ctx, o, cpu, func(n int) (time.Duration, error) {
		m, err := smallPages(n * pageSize)
		if err != nil {
			return 0, err
		}
		defer unix.Munmap(m)
		start := time.Now()
		for i := 0; i < len(m); i += pageSize {
			m[i] = 1
		}
		return time.Since(start), nil
	})
}

// forkPages is the present anonymous pages of the fork_page measurement's
// helper: 16 MiB, 8 PTE tables.
const forkPages = 4096

// forkCount is the forks of one timed batch of Fork with pages present
// pages.
func forkCount(o Options, pages int) int {
	if pages == 0 {
		return o.count(200)
	}
	return o.count(50)
}

// Fork measures fork(2) of a minimal process with pages present anonymous
// 4 KiB pages, per fork: the times the helper of live.ForkHelperELF reports for
// its forks, each from inside one clock_gettime(2) to inside the next
// (the fork's round trip and one more syscall's exit and entry; not the
// child's exit nor the wait). The helper is written into a directory of
// this run (MkdirRunTemp), executed once per batch from a thread pinned to
// cpu at SCHED_FIFO, whose affinity and policy it inherits, and removed
// when the measurement ends. It is x86-64 code (ErrNotSupported
// elsewhere).
//
// It also returns every fork's interval, in nanoseconds, in the order
// timed.
func Fork(ctx context.Context, o Options, cpu, pages int) (runs, forks []float64, err error) {
	if runtime.GOARCH != "amd64" {
		return nil, nil, live.Unsupported("the fork helper is x86-64 code; this is %s", runtime.GOARCH)
	}
	n := forkCount(o, pages)
	dir, err := live.MkdirExecTemp(forkHelperPrefix)
	if err != nil {
		return nil, nil, fmt.Errorf("the fork helper: %w", err)
	}
	defer os.RemoveAll(dir)
	helper := filepath.Join(dir, "forkhelper")
	if err := os.WriteFile(helper, live.ForkHelperELF(live.ForkHelper{Pages: uint32(pages), Forks: uint32(n), CPU: -1}), 0o755); err != nil {
		return nil, nil, err
	}
	runs, err = repeat(ctx, o.Runs, func() (float64, error) {
		return onCPU(cpu, func() (float64, error) {
			return batched(n, 1, func(int) (time.Duration, error) {
				var out bytes.Buffer
				cmd := exec.Command(helper)
				cmd.Stdout, cmd.Env = &out, []string{}
				if err := cmd.Run(); err != nil {
					return 0, fmt.Errorf("the fork helper: %w", live.ForkHelperExit(err))
				}
				if out.Len() != 16*n {
					return 0, fmt.Errorf("the fork helper wrote %d bytes, want %d records of 16", out.Len(), n)
				}
				var sum time.Duration
				for _, r := range live.ParseForkRecords(out.Bytes()) {
					sum += time.Duration(r.Dur)
					forks = append(forks, float64(r.Dur))
				}
				return sum, nil
			})
		})
	})
	return runs, forks, err
}

// forkSampleCount is how many of a fork measurement's intervals a host
// description keeps as the fork's samples (machine.Cost.Samples): that
// many evenly spaced quantiles of them, so that the file stays small
// while the tail a window's longest fork draws from stays in (a model
// choice: the top 1/2048 of the forks is one sample).
const forkSampleCount = 2048

// forkSamples returns the fork costs a simulated machine draws from:
// forkSampleCount quantiles of the intervals (all of them if fewer), each
// less syscalls (the syscalls' share of an interval) and at least 0, to
// the nanosecond.
func forkSamples(intervals []float64, syscalls float64) []float64 {
	v := slices.Sorted(slices.Values(intervals))
	n := min(len(v), forkSampleCount)
	out := make([]float64, n)
	for i := range n {
		out[i] = max(math.Round(v[(2*i+1)*len(v)/(2*n)]-syscalls), 0)
	}
	return out
}

// forkHelperPrefix starts the name of the directory of each Fork's helper;
// the run's live.RunName follows, so that the next run removes the
// directory of one that was killed.
const forkHelperPrefix = "mmlab-calibrate-"

func init() {
	live.RegisterSweeper(func() []string { return live.SweepExecTemp(forkHelperPrefix) })
}

// LineHandoff measures a cache line's one-way hand-off between threads
// pinned to a and b that take turns compare-and-swapping one word (0 -> 1
// on a, 1 -> 0 on b), spinning until their turn, as
// nviennot/core-to-core-latency does (src/bench/cas.rs): a round trip's
// time halved, a line transfer and a CAS.
func LineHandoff(ctx context.Context, o Options, a, b int) ([]float64, error) {
	n := o.count(5_000)
	return repeat(ctx, o.Runs, func() (float64, error) {
		// A 256-byte object sits in a 256-byte size class, aligned to
		// 256: the word's line holds nothing else.
		line := new([32]atomic.Int64)
		word := &line[0]
		// stop ends the spinning of one side when the other failed, and
		// b's once a is done: a load of a line nobody writes until then,
		// which stays shared.
		var ready, stop atomic.Bool
		return beside(a, b, ready.Load, &stop, func() (float64, error) {
			ready.Store(true)
			for range batches * n {
				for !word.CompareAndSwap(1, 0) {
					if stop.Load() {
						return 0, nil
					}
				}
			}
			return 0, nil
		}, func() (float64, error) {
			return batched(n, 2, func(n int) (time.Duration, error) {
				start := time.Now()
				for range n {
					for !word.CompareAndSwap(0, 1) {
					}
				}
				return time.Since(start), nil
			})
		})
	})
}

// Run measures this host and returns its calibration. It needs Linux,
// root, and two CPUs this process may run on.
func Run(ctx context.Context, o Options) (machine.Calibration, error) {
	if !live.IsRoot() {
		return machine.Calibration{}, live.Unsupported("mmlab calibrate needs root (it pins threads to each CPU and measures the kernel's paths as the experiments run them)")
	}
	if o.Progress == nil {
		o.Progress = func(string, ...any) {}
	}
	cpus, err := AllowedCPUs()
	if err != nil {
		return machine.Calibration{}, err
	}
	if len(cpus) < 2 {
		return machine.Calibration{}, live.Unsupported("mmlab calibrate needs two CPUs to measure a wake-up and a line's hand-off; this process may run on %v", cpus)
	}
	top, locs, err := machine.ReadTopology("/sys")
	if err != nil {
		return machine.Calibration{}, fmt.Errorf("the CPU topology: %w", err)
	}
	ghz := machine.HostClock()
	if ghz <= 0 {
		return machine.Calibration{}, live.Unsupported("/proc/cpuinfo gives no clock (cpu MHz)")
	}
	hostname, _ := os.Hostname()
	at := fmt.Sprintf("calibrate on %s at %s", hostname, time.Now().UTC().Format(time.RFC3339))
	d := machine.Host()
	d.Source = at + ": this host's primitives measured by mmlab calibrate; its features read from /proc as every run reads them"
	d.Topology = top
	d.Clock = machine.Clock{GHz: ghz, Source: at + ": /proc/cpuinfo's cpu MHz of the first CPU"}
	if d.Kernel.Mitigations == "" {
		d.Kernel.Mitigations = "none reported (no /sys/devices/system/cpu/vulnerabilities)"
	}
	c := machine.Calibration{}
	a, b := cpus[0], cpus[1]
	o.Progress("calibrate: each run is the median of %d timed batches on threads pinned to their CPU at SCHED_FIFO %d (where the kernel allows it)", batches, fifoPriority)
	measured := func(name, what string, ns []float64, err error) (machine.Measurement, error) {
		if err != nil {
			return machine.Measurement{}, fmt.Errorf("%s: %w", name, err)
		}
		m := Summarize(name, what, ns)
		c.Measurements = append(c.Measurements, m)
		o.Progress("calibrate: %-28s median %9.1f ns  (min %.1f, max %.1f, spread %.0f%%, %d runs)", name, m.Median, m.Min, m.Max, 100*Spread(m), len(ns))
		return m, nil
	}
	cost := func(m machine.Measurement) machine.Cost {
		return machine.Cost{NS: m.Median, Source: fmt.Sprintf("%s: %s; median of %d runs (%.1f-%.1f ns), each the median of %d batches", at, m.What, len(m.NS), m.Min, m.Max, batches)}
	}
	type step struct {
		name, what string
		run        func() ([]float64, error)
		set        func(machine.Measurement)
	}
	var sys machine.Measurement
	steps := []step{
		{"syscall", fmt.Sprintf("getppid(2) by a raw syscall on CPU %d", a),
			func() ([]float64, error) { return Syscall(ctx, o, a) },
			func(m machine.Measurement) { sys, d.Costs.Syscall = m, cost(m) }},
		{"locked_rmw", fmt.Sprintf("an uncontended LOCK XADD on CPU %d", a),
			func() ([]float64, error) { return LockedRMW(ctx, o, a) },
			func(m machine.Measurement) { d.Costs.LockedRMW = cost(m) }},
		{"context_switch", fmt.Sprintf("half a pipe round trip between two threads on CPU %d (one write, one read, one switch)", a),
			func() ([]float64, error) { return PipeHandoff(ctx, o, a, a) },
			func(m machine.Measurement) { d.Costs.ContextSwitch = cost(m) }},
		{"wakeup", fmt.Sprintf("half a pipe round trip between threads on CPUs %d and %d (one write, one read, one cross-CPU wake-up)", a, b),
			func() ([]float64, error) { return PipeHandoff(ctx, o, a, b) },
			func(m machine.Measurement) { d.Costs.Wakeup = cost(m) }},
		{"membarrier", fmt.Sprintf("membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) on CPU %d while a thread of this process reads /dev/zero on CPU %d", a, b),
			func() ([]float64, error) { return Membarrier(ctx, o, a, b) },
			func(m machine.Measurement) {
				d.Costs.IPI = machine.Cost{NS: max(m.Median-sys.Median, 0),
					Source: fmt.Sprintf("%s: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), median %.1f ns of %d runs, less the syscall's %.1f ns: one IPI to CPU %d, sent, handled and waited for", at, m.Median, len(m.NS), sys.Median, b)}
			}},
		{"open_close", fmt.Sprintf("openat(2) of /dev/null and close(2) by raw syscalls on CPU %d", a),
			func() ([]float64, error) { return OpenClose(ctx, o, a) },
			func(m machine.Measurement) {
				d.Costs.KernelInstruction = machine.Cost{NS: (m.Median - 2*sys.Median) / openCloseInstructions, Source: fmt.Sprintf(
					"%s: openat(2) of /dev/null and close(2), median %.1f ns of %d runs (%.1f-%.1f ns), less two syscalls' %.1f ns, over the %d kernel instructions the pair runs beyond two entries and exits (6.18.15, counted in QEMU TCG with -icount): one declared point, none of the figures a simulated run is compared with",
					at, m.Median, len(m.NS), m.Min, m.Max, sys.Median, openCloseInstructions)}
			}},
		{"page_fault", fmt.Sprintf("first-touch write faults on %d anonymous 4 KiB pages (MADV_NOHUGEPAGE) on CPU %d, per page", o.count(populatePages), a),
			func() ([]float64, error) { return PageFault(ctx, o, a) },
			func(m machine.Measurement) { d.Costs.PageFault = cost(m) }},
		{"populate_page", populateWhat(o, a),
			func() ([]float64, error) { return Populate(ctx, o, a) },
			func(m machine.Measurement) { d.Costs.PopulatePage = cost(m) }},
		{"zap_page", fmt.Sprintf("munmap(2) of %d populated anonymous 4 KiB pages (MADV_NOHUGEPAGE) on CPU %d, per page", o.count(populatePages), a),
			func() ([]float64, error) { return Zap(ctx, o, a) },
			func(m machine.Measurement) { d.Costs.ZapPage = cost(m) }},
	}
	// post_idle is each idle length's openat less the one back to back.
	var warm machine.Measurement
	var idle []machine.IdlePoint
	steps = append(steps, step{"openat", afterIdleWhat(a, 0),
		func() ([]float64, error) { return AfterIdle(ctx, o, a, 0) },
		func(m machine.Measurement) { warm = m }})
	for _, l := range idleLengths {
		steps = append(steps, step{fmt.Sprintf("openat_after_%v", l), afterIdleWhat(a, l),
			func() ([]float64, error) { return AfterIdle(ctx, o, a, l) },
			func(m machine.Measurement) {
				idle = append(idle, machine.IdlePoint{IdleNS: float64(l), ExtraNS: max(m.Median-warm.Median, 0)})
			}})
	}
	// fork is measured as is, fork_page as what forkPages present pages
	// add to it.
	var fork0 machine.Measurement
	var forks []float64
	forkSteps := []step{
		{"fork", forkWhat(o, a, 0),
			func() (runs []float64, err error) {
				runs, forks, err = Fork(ctx, o, a, 0)
				return runs, err
			},
			func(m machine.Measurement) {
				fork0 = m
				samples := forkSamples(forks, 2*sys.Median)
				d.Costs.Fork = machine.Cost{NS: m.Median - 2*sys.Median, Samples: samples, Source: fmt.Sprintf(
					"%s: %s, median %.1f ns of %d runs (%.1f-%.1f ns), each the median of %d batches, less twice the syscall's %.1f ns (the fork's round trip, and the exit and entry of the clock_gettime calls around it); each simulated fork draws from %d quantiles of the %d forks timed, less the same (their tail holds the work a fork and its child's exit leave to softirqs and the noise that hit them, which the simulated noise adds again)",
					at, m.What, m.Median, len(m.NS), m.Min, m.Max, batches, sys.Median, len(samples), len(forks))}
			}},
		{fmt.Sprintf("fork_%dpages", forkPages), forkWhat(o, a, forkPages),
			func() ([]float64, error) {
				runs, _, err := Fork(ctx, o, a, forkPages)
				return runs, err
			},
			func(m machine.Measurement) {
				d.Costs.ForkPage = machine.Cost{NS: (m.Median - fork0.Median) / forkPages, Source: fmt.Sprintf(
					"%s: the helper's fork with %d present anonymous 4 KiB pages, median %.1f ns of %d runs (%.1f-%.1f ns), less its fork without them (%.1f ns), per page: copy_pte_range()'s copy_present_pte(), with the child's page-table pages and the copy of the pages' one VMA spread over them",
					at, forkPages, m.Median, len(m.NS), m.Min, m.Max, fork0.Median)}
			}},
	}
	if runtime.GOARCH == "amd64" {
		steps = append(steps, forkSteps...)
	} else {
		notMeasured := machine.Cost{Source: fmt.Sprintf("%s: not measured on %s (the fork helper is x86-64 code): %s", at, runtime.GOARCH, machine.NotCharged)}
		d.Costs.Fork, d.Costs.ForkPage = notMeasured, notMeasured
	}
	defer func() {
		if e := fifoErr.Load(); e != nil {
			o.Progress("calibrate: SCHED_FIFO not set (%v): the figures include waits behind the host's other tasks", *e)
		}
	}()
	for _, s := range steps {
		o.Progress("calibrate: measuring %s: %s", s.name, s.what)
		ns, err := s.run()
		m, err := measured(s.name, s.what, ns, err)
		if err != nil {
			return machine.Calibration{}, err
		}
		s.set(m)
	}
	d.PostIdle = machine.PostIdle{Points: idle, Source: fmt.Sprintf(
		"%s: openat(2) of /dev/null by a raw syscall on CPU %d at SCHED_FIFO %d, timed alone right after a nanosleep(2) of each idle length, less the same openat back to back (median %.1f ns of %d runs), at least 0; each run the median of its openats: one declared point per idle length, none of the figures a simulated run is compared with",
		at, a, fifoPriority, warm.Median, len(warm.NS))}
	o.Progress("calibrate: post-idle: %s", d.PostIdle)
	o.Progress("calibrate: measuring noise: what interrupts a thread at SCHED_FIFO on each CPU")
	noise, what, err := Noise(ctx, o, cpus)
	if err != nil {
		return machine.Calibration{}, fmt.Errorf("noise: %w", err)
	}
	noise.Source = at + ": " + what
	d.Noise = noise
	o.Progress("calibrate: noise: %s", noise)
	pairs := Pairs(cpus, locs, o.PairsPerClass)
	for _, class := range machine.Distances {
		var medians []float64
		var names []string
		for _, p := range pairs[class] {
			what := fmt.Sprintf("CAS ping-pong between CPUs %d and %d (%s), one-way hand-off", p[0], p[1], class)
			o.Progress("calibrate: measuring %s", what)
			ns, err := LineHandoff(ctx, o, p[0], p[1])
			m, err := measured(fmt.Sprintf("line %d-%d", p[0], p[1]), what, ns, err)
			if err != nil {
				return machine.Calibration{}, err
			}
			medians = append(medians, m.Median)
			names = append(names, fmt.Sprintf("%d-%d", p[0], p[1]))
		}
		var lc machine.Cost
		if len(medians) == 0 {
			lc.Source = at + ": this host has no pair of CPUs of this class"
		} else {
			s := Summarize(class, "", medians)
			lc = machine.Cost{NS: s.Median, Source: fmt.Sprintf("%s: CAS ping-pong, one-way hand-off, median over CPU pairs %s of each pair's median of %d runs", at, strings.Join(names, ", "), o.Runs)}
		}
		switch class {
		case machine.SameCore:
			d.Costs.LineSMT = lc
		case machine.SameLLC:
			d.Costs.LineLLC = lc
		case machine.SameSocket:
			d.Costs.LineSocket = lc
		case machine.Remote:
			d.Costs.LineRemote = lc
		}
	}
	d.Costs.Instruction = machine.Cost{NS: 1 / ghz, Source: fmt.Sprintf("model choice: one cycle per instruction at the %.3f GHz clock (%s)", ghz, d.Clock.Source)}
	vendor := cpuVendor()
	delta, deltaSource := Int3Delta(vendor)
	d.Costs.Int3 = machine.Cost{NS: sys.Median + delta, Source: fmt.Sprintf(
		"not measured (the Go runtime owns SIGTRAP): the syscall's %.1f ns (%s) plus the published int3+IRET minus syscall+SYSRET delta for %s, %s, derived from Jiri Olsa's \"uprobe: Add uretprobe syscall to speed up return probe\" cover letter",
		sys.Median, at, vendor, deltaSource)}
	c.Description = d
	if err := d.Costs.Validate(); err != nil {
		return machine.Calibration{}, err
	}
	return c, nil
}

func afterIdleWhat(cpu int, idle time.Duration) string {
	if idle == 0 {
		return fmt.Sprintf("openat(2) of /dev/null timed alone by a raw syscall on CPU %d, back to back (each close(2) untimed)", cpu)
	}
	return fmt.Sprintf("openat(2) of /dev/null timed alone by a raw syscall on CPU %d right after a nanosleep(2) of %v (each close(2) untimed)", cpu, idle)
}

func forkWhat(o Options, cpu, pages int) string {
	return fmt.Sprintf("fork(2) of a static x86-64 helper of one page with %d present anonymous 4 KiB pages, %d forks a batch, timed in the helper between two clock_gettime(2) around each, from CPU %d at SCHED_FIFO %d, per fork", pages, forkCount(o, pages), cpu, fifoPriority)
}

func populateWhat(o Options, cpu int) string {
	if thpAlways() {
		return fmt.Sprintf("madvise(MADV_POPULATE_WRITE) of %d anonymous 4 KiB pages (MADV_NOHUGEPAGE: transparent huge pages are always on) on CPU %d, per page", o.count(populatePages), cpu)
	}
	return fmt.Sprintf("mmap(MAP_POPULATE) of %d anonymous 4 KiB pages on CPU %d, per page", o.count(populatePages), cpu)
}

// cpuVendor is /proc/cpuinfo's vendor_id.
func cpuVendor() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "vendor_id"); ok {
			return strings.TrimSpace(strings.TrimLeft(rest, "\t :"))
		}
	}
	return "unknown"
}
