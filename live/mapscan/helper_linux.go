package mapscan

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"mmlab/experiment/mapscan"
	"mmlab/host"
	"mmlab/live"
	"mmlab/live/procmaps"
	"mmlab/uapi"
)

// The helper roles, and the scanner's environment: the mapper's pid and
// the scanner kind (text or query).
const (
	roleMapper  = "mapscan-mapper"
	roleScanner = "mapscan-scanner"
	roleBusy    = "mapscan-busy"
	pidEnv      = "MMLAB_MAPSCAN_PID"
	kindEnv     = "MMLAB_MAPSCAN_KIND"
	busyEnv     = "MMLAB_MAPSCAN_BUSY_NS" // the busy-waiter's spin in ns (0: for ever)
	cpuEnv      = "MMLAB_MAPSCAN_CPU"     // the CPU of a scanner or busy-waiter
)

func init() {
	live.RegisterRole(roleMapper, helper(mapperMain))
	live.RegisterRole(roleScanner, helper(func() error { return scannerMain(os.Getenv(pidEnv), os.Getenv(kindEnv), os.Getenv(cpuEnv)) }))
	live.RegisterRole(roleBusy, helper(func() error { return busyMain(os.Getenv(busyEnv), os.Getenv(cpuEnv)) }))
}

// helper returns the role main of a helper: on error it prints "err ..."
// for the parent and exits 1.
func helper(run func() error) func() int {
	return func() int {
		if err := run(); err != nil {
			fmt.Printf("err %v\n", err)
			return 1
		}
		return 0
	}
}

// pinThreadTo is pinThread on the CPU cpuStr names in decimal.
func pinThreadTo(cpuStr string, nice int) error {
	cpu, err := strconv.Atoi(cpuStr)
	if err != nil || cpu < 0 {
		return fmt.Errorf("bad CPU %q", cpuStr)
	}
	return pinThread(cpu, nice)
}

// pinThread locks the goroutine to its thread and puts the thread on cpu
// at nice, and makes the process's other threads, the Go runtime's,
// SCHED_IDLE: the seed's helpers are single-threaded C programs and shell
// scripts, and a runtime thread at nice 0 (sysmon among them)
// would preempt a nice-15 cat on waking where none of theirs does. A text
// scanner's cats are forked by the working thread and take its policy.
func pinThread(cpu, nice int) error {
	runtime.LockOSThread()
	if err := host.Pin(cpu); err != nil {
		return err
	}
	if err := host.SetNice(nice); err != nil {
		return err
	}
	return host.IdleOtherThreads()
}

// ready says "ready TID": the helper is set up, on the thread TID.
func ready() { fmt.Printf("ready %d\n", unix.Gettid()) }

// mapperReport is the mapper's last line, "stats" and its JSON.
type mapperReport struct {
	Stats mapscan.Stats
	Span  lockSpan
}

// monoClock converts the times of time.Now to CLOCK_MONOTONIC ns, the
// trace clock "mono": Go's monotonic reading advances with it, and the
// offset is taken once, to within the length of one clock_gettime.
type monoClock struct {
	base time.Time
	ns   int64
}

func newMonoClock() monoClock {
	var ts unix.Timespec
	t0 := time.Now()
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	t1 := time.Now()
	return monoClock{base: t0.Add(t1.Sub(t0) / 2), ns: ts.Nano()}
}

func (c monoClock) mono(t time.Time) int64 { return c.ns + int64(t.Sub(c.base)) }

// mapperMain maps the region (populated, as mapper.c does), says "ready",
// waits for "go DURATION_NS SEED", fragments the region with the warm-up
// operations, runs, prints its mapperReport as one JSON line, and exits at
// the next line or EOF on stdin.
func mapperMain() error {
	if err := pinThread(0, 0); err != nil {
		return err
	}
	region, _, e := unix.Syscall6(unix.SYS_MMAP, 0, mapscan.RegionSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE, ^uintptr(0), 0)
	if e != 0 {
		return fmt.Errorf("mmap of the region: %s", unix.ErrnoName(e))
	}
	in := bufio.NewReader(os.Stdin)
	ready()
	var durNS int64
	var seed uint64
	line, err := in.ReadString('\n')
	if err != nil {
		return nil // the parent went away
	}
	if _, err := fmt.Sscanf(line, "go %d %d\n", &durNS, &seed); err != nil {
		return fmt.Errorf("bad command %q", line)
	}
	rng := rand.New(rand.NewPCG(seed, 0x6d61707363616e))
	const pages = mapscan.RegionSize / mapscan.PageSize
	op := func() (bool, error) {
		addr := region + uintptr(rng.IntN(pages))*mapscan.PageSize
		if rng.IntN(2) == 0 {
			_, _, e := unix.Syscall6(unix.SYS_MMAP, addr, mapscan.PageSize, unix.PROT_READ|unix.PROT_WRITE,
				unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED|unix.MAP_POPULATE, ^uintptr(0), 0)
			if e != 0 {
				return true, fmt.Errorf("mmap: %s", unix.ErrnoName(e))
			}
			return true, nil
		}
		if _, _, e := unix.Syscall(unix.SYS_MUNMAP, addr, mapscan.PageSize, 0); e != 0 {
			return false, fmt.Errorf("munmap: %s", unix.ErrnoName(e))
		}
		return false, nil
	}
	for range mapscan.WarmupOps {
		if _, err := op(); err != nil {
			return err
		}
	}
	var acc mapscan.Acc
	clock := newMonoClock()
	var first, last, slow0 time.Time
	var slowest time.Duration = -1
	deadline := time.Now().Add(time.Duration(durNS))
	for time.Now().Before(deadline) {
		t0 := time.Now()
		isMmap, err := op()
		t1 := time.Now()
		if err != nil {
			return err
		}
		d := t1.Sub(t0)
		acc.Add(isMmap, d, 0)
		if first.IsZero() {
			first = t0
		}
		last = t1
		if d > slowest {
			slowest, slow0 = d, t0
		}
		host.Nanosleep(mapscan.MapperSleep)
	}
	span := lockSpan{Mapper: unix.Gettid(), From: clock.mono(first), To: clock.mono(last), SlowFrom: clock.mono(slow0), SlowTo: clock.mono(slow0.Add(slowest))}
	b, _ := json.Marshal(mapperReport{acc.Stats(), span})
	fmt.Printf("stats %s\n", b)
	in.ReadString('\n') // stay until the scanners are done: EOF or any line
	return nil
}

// scannerMain reads pid's maps on CPU cpu in a loop until SIGTERM, then
// prints the number of full passes.
func scannerMain(pidStr, kind, cpu string) error {
	pid, err := strconv.Atoi(pidStr)
	if err != nil {
		return fmt.Errorf("bad pid %q", pidStr)
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	if err := pinThreadTo(cpu, mapscan.ScannerNice); err != nil {
		return err
	}
	var pass func() error
	switch kind {
	case "text":
		// scanpid.sh: cat /proc/PID/maps >/dev/null, a new cat each pass
		// (forked by this pinned, niced thread, whose CPU and nice it
		// inherits).
		cat, err := exec.LookPath("cat")
		if err != nil {
			return err
		}
		null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer null.Close()
		path := "/proc/" + pidStr + "/maps"
		pass = func() error {
			cmd := exec.Command(cat, path)
			cmd.Stdout, cmd.Stderr = null, os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("%s %s: %w", cat, path, err)
			}
			return nil
		}
	case "query":
		r, err := procmaps.Open(pid)
		if err != nil {
			return err
		}
		pass = func() error { return r.WalkQuery(func(*uapi.VMA) bool { return true }) }
	default:
		return fmt.Errorf("unknown scanner kind %q", kind)
	}
	ready()
	for n := 0; ; n++ {
		select {
		case <-term:
			fmt.Printf("passes %d\n", n)
			return nil
		default:
		}
		if err := pass(); err != nil {
			return err
		}
	}
}

// busyMain is busywait.c: on its CPU at normal priority it spins for the
// duration in ns busyNS (for ever if 0), then sleeps 1 ms, until killed.
func busyMain(busyNS, cpu string) error {
	ns, err := strconv.ParseInt(busyNS, 10, 64)
	if err != nil || ns < 0 {
		return fmt.Errorf("bad busy duration %q", busyNS)
	}
	if err := pinThreadTo(cpu, 0); err != nil {
		return err
	}
	ready()
	for {
		t0 := time.Now()
		for ns == 0 || time.Since(t0) < time.Duration(ns) {
		}
		host.Nanosleep(mapscan.BusySleep)
	}
}
