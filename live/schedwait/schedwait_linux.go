package schedwait

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe" // and for go:linkname

	"golang.org/x/sys/unix"

	"mmlab/experiment"
	"mmlab/experiment/schedwait"
	"mmlab/host"
	"mmlab/live"
	"mmlab/live/tracefs"
)

// The helper's role and its environment: the CPU of the two threads.
const (
	rolePair = "schedwait-pair"
	cpuEnv   = "MMLAB_SCHEDWAIT_CPU"
)

func init() { live.RegisterRole(rolePair, pairMain) }

// Run runs the workload on the running kernel for o.Duration on one CPU
// (o.CPU, or the last CPU this process may use) and emits the nice-15
// task's wait distribution. The helper and the trace instance are gone
// when it returns, on error or cancellation too.
func Run(ctx context.Context, o *schedwait.Options, env experiment.Env, emit func(schedwait.Result)) error {
	if !live.IsRoot() {
		return live.Unsupported("the sched_switch trace needs a tracefs instance: needs root")
	}
	cpus, err := host.CPUs()
	if err != nil {
		return err
	}
	cpu := o.CPU
	if cpu < 0 {
		cpu = cpus[len(cpus)-1]
	}
	if !slices.Contains(cpus, cpu) {
		return fmt.Errorf("schedwait: --cpu %d: this process may run on CPUs %v only", cpu, cpus)
	}
	h, err := startPair(ctx, cpu)
	if err != nil {
		return err
	}
	defer h.Kill()
	group, err := setGroupNice(h.Cmd.Process.Pid, o.GroupNice)
	if err != nil {
		return err
	}
	tr, err := startTrace(cpu, h.hog, h.nice15, o.Duration.D())
	if err != nil {
		return err
	}
	defer tr.Close()
	env.Progress("tracing the nice-0 task %d and the nice-15 task %d on CPU %d for %v", h.hog, h.nice15, cpu, o.Duration)
	if _, err := fmt.Fprintf(h.In, "go %d %d\n", o.Duration.D().Nanoseconds(), o.Seed); err != nil {
		if ctx.Err() != nil {
			// The helper is a CommandContext: a cancel kills it, so
			// the write may find its pipe closed.
			return ctx.Err()
		}
		return fmt.Errorf("schedwait: helper: %w", err)
	}
	line, err := h.ExpectContext(ctx, "done")
	if err != nil && err == ctx.Err() {
		return err // the deferred Close and kill remove the instance and end the helper
	}
	if err != nil {
		return fmt.Errorf("schedwait: helper: %w", err)
	}
	var from, to int64
	var hogLoops, loops int
	if _, err := fmt.Sscanf(line, "%d %d %d %d", &from, &to, &hogLoops, &loops); err != nil {
		return fmt.Errorf("schedwait: helper's answer %q: %w", line, err)
	}
	if err := tr.Stop(); err != nil {
		return err
	}
	env.Progress("reading the trace")
	evs, lost, err := tr.Events()
	if err != nil {
		return err
	}
	ws, missed, leftOut := Waits(evs, Trace{Hog: h.hog, Nice15: h.nice15, CPU: cpu, From: from, To: to})
	r := schedwait.Summarize(experiment.LiveRow, ws)
	r.CPU = cpu
	r.Live = liveFigures(ws)
	r.LostEvents, r.MissedSwitches, r.LeftOut, r.HogLoops, r.Autogroup = lost, missed, leftOut, hogLoops, group
	emit(r)
	return nil
}

// liveFigures are the figures of the wake-ups during whose wait no other
// task ran.
func liveFigures(ws []schedwait.Wake) *schedwait.Live {
	l := &schedwait.Live{}
	var clean []time.Duration
	for _, w := range ws {
		if w.Others {
			l.OthersShare++
		} else {
			clean = append(clean, w.Wait)
		}
	}
	if len(ws) > 0 {
		l.OthersShare /= float64(len(ws))
	}
	slices.Sort(clean)
	l.Clean, l.CleanP50US = len(clean), schedwait.Quantile(clean, .5)
	return l
}

// startTrace creates the run's instance: every sched_switch of CPU cpu and
// the sched_wakeups of the two threads, in a buffer of 2 MiB per CPU per
// second of the run (16 to 64 MiB; a CPU of this loaded host switches some
// 15,000 times a second), on the mono clock (CLOCK_MONOTONIC, the helper's).
func startTrace(cpu, hog, nice15 int, d time.Duration) (*tracefs.Instance, error) {
	tr, err := tracefs.New("mono")
	if err != nil {
		return nil, err
	}
	kb := min(max(int(d.Seconds()*2048), 16<<10), 64<<10)
	for _, step := range []func() error{
		func() error { return tr.SetBufferKB(kb) },
		func() error { return tr.SetEvent("sched/sched_switch", "filter", fmt.Sprintf("CPU == %d", cpu)) },
		func() error {
			return tr.SetEvent("sched/sched_wakeup", "filter", fmt.Sprintf("pid == %d || pid == %d", hog, nice15))
		},
		func() error { return tr.Enable("sched/sched_switch", "sched/sched_wakeup") },
		tr.Start,
	} {
		if err := step(); err != nil {
			tr.Close()
			return nil, err
		}
	}
	return tr, nil
}

// setGroupNice sets the nice level of pid's autogroup (/proc/PID/autogroup,
// proc_sched_autogroup_set_nice) and returns the group as the file names
// it; "" where the kernel has no autogroups, which only nice 0 accepts.
func setGroupNice(pid, nice int) (string, error) {
	file := fmt.Sprintf("/proc/%d/autogroup", pid)
	on, _ := os.ReadFile("/proc/sys/kernel/sched_autogroup_enabled")
	if _, err := os.Stat(file); err != nil || strings.TrimSpace(string(on)) != "1" {
		if nice != 0 {
			return "", live.Unsupported("--group-nice %d: the kernel schedules no autogroups (CONFIG_SCHED_AUTOGROUP, kernel.sched_autogroup_enabled)", nice)
		}
		return "", nil
	}
	if err := os.WriteFile(file, []byte(strconv.Itoa(nice)), 0); err != nil {
		return "", fmt.Errorf("schedwait: --group-nice %d: %w", nice, err)
	}
	b, err := os.ReadFile(file)
	return strings.TrimSpace(string(b)), err
}

// pair is the helper process.
type pair struct {
	*live.Helper
	hog, nice15 int // the threads' ids
}

// startPair starts the helper with its two threads on cpu. Its Go runtime
// stays out of the threads' way: no collection (GOGC=off), no
// asynchronous preemption (asyncpreemptoff=1: no SIGURG wakes a sleeper),
// and a third P for its control goroutines, which the threads' loops,
// holding theirs, never give up.
func startPair(ctx context.Context, cpu int) (*pair, error) {
	debug := "asyncpreemptoff=1"
	if g := os.Getenv("GODEBUG"); g != "" {
		debug = g + "," + debug
	}
	cmd, err := live.Command(ctx, rolePair, "GOGC=off", "GOMAXPROCS=3", "GODEBUG="+debug, cpuEnv+"="+strconv.Itoa(cpu))
	if err != nil {
		return nil, fmt.Errorf("schedwait: %w", err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // an autogroup of its own (ksys_setsid → sched_autogroup_create_attach)
	h, err := live.StartHelper(cmd)
	if err != nil {
		return nil, fmt.Errorf("schedwait: starting the helper: %w", err)
	}
	p := &pair{Helper: h}
	rest, err := p.Expect("ready")
	if err == nil {
		_, err = fmt.Sscanf(rest, "%d %d", &p.hog, &p.nice15)
	}
	if err != nil {
		p.Kill()
		return nil, fmt.Errorf("schedwait: the helper did not start: %w", err)
	}
	return p, nil
}

// worker is one of the helper's two threads.
type worker struct {
	nice  int
	tid   int
	loops int
}

// pairMain is the helper: two threads pinned to the CPU of cpuEnv, the
// nice-0 one and the nice-15 one, each with a timer slack of 1 ns (the
// default 50 µs would end every sleep up to 50 µs late, where the sim's
// end on time). It says "ready HOG NICE15", waits for "go DURATION_NS
// SEED", runs both loops from a common start 10 ms later (CLOCK_MONOTONIC
// FROM) until TO = FROM + DURATION, says "done FROM TO HOGLOOPS LOOPS",
// and exits at the next line or EOF.
func pairMain() int {
	fail := func(err error) int { fmt.Printf("err %v\n", err); return 1 }
	cpu, err := strconv.Atoi(os.Getenv(cpuEnv))
	if err != nil || cpu < 0 {
		return fail(fmt.Errorf("bad CPU %q", os.Getenv(cpuEnv)))
	}
	ws := []*worker{{nice: schedwait.HogNice}, {nice: schedwait.Nice15}}
	var from, to int64
	var sleeps []int64
	ready := make(chan error, len(ws))
	start := make(chan struct{})
	done := make(chan struct{}, len(ws))
	for i, w := range ws {
		go func() {
			runtime.LockOSThread() // for good: the thread ends with the helper
			err := host.Pin(cpu)
			if err == nil {
				err = host.SetNice(w.nice)
			}
			if err == nil {
				err = host.SetTimerSlack(time.Nanosecond)
			}
			w.tid = unix.Gettid()
			ready <- err
			if err != nil {
				return
			}
			<-start
			if i == 0 {
				w.loops = hogLoop(from, to)
			} else {
				w.loops = nice15Loop(from, to, sleeps)
			}
			done <- struct{}{}
		}()
	}
	for range ws {
		if err := <-ready; err != nil {
			return fail(err)
		}
	}
	pinOthers(cpu, ws[0].tid, ws[1].tid)
	fmt.Printf("ready %d %d\n", ws[0].tid, ws[1].tid)
	in := bufio.NewReader(os.Stdin)
	line, err := in.ReadString('\n')
	if err != nil {
		return 0 // the parent went away
	}
	var durNS int64
	var seed uint64
	if _, err := fmt.Sscanf(line, "go %d %d\n", &durNS, &seed); err != nil || durNS <= 0 {
		return fail(fmt.Errorf("bad command %q", line))
	}
	next := schedwait.Sleeps(seed)
	for range durNS/int64(schedwait.Nice15Run+schedwait.SleepMin) + 1 {
		sleeps = append(sleeps, int64(next()))
	}
	from = nanotime() + int64(10*time.Millisecond)
	to = from + durNS
	close(start)
	for range ws {
		<-done
	}
	fmt.Printf("done %d %d %d %d\n", from, to, ws[0].loops, ws[1].loops)
	in.ReadString('\n')
	return 0
}

// pinOthers pins the helper's threads but the two to the CPUs this process
// may use other than cpu (best effort; none where cpu is the only one):
// the Go runtime's threads then stay off the two's CPU. A thread the
// runtime starts later inherits the mask of the one that starts it, which
// is never one of the two: a locked thread hands the start of a new one
// to the runtime's template thread (runtime.newm).
func pinOthers(cpu int, keep ...int) {
	cpus, err := host.CPUs()
	if err != nil {
		return
	}
	var set unix.CPUSet
	for _, c := range cpus {
		if c != cpu {
			set.Set(c)
		}
	}
	if set.Count() == 0 {
		return
	}
	tasks, _ := filepath.Glob("/proc/self/task/*")
	for _, t := range tasks {
		tid, err := strconv.Atoi(filepath.Base(t))
		if err == nil && !slices.Contains(keep, tid) {
			_ = unix.SchedSetaffinity(tid, &set)
		}
	}
}

// The loops run from FROM to TO without entering Go's scheduler: they call
// only nosplit functions (no stack check, so sysmon's preemption request
// after 10 ms is never seen) and make raw system calls (no
// entersyscall, so the P is never handed off). A scheduler entry would
// park the locked thread on a futex and wake it again: sleeps and
// wake-ups that are not the workload's.

// hogLoop sleeps until from, then spins HogSpin and sleeps HogSleep until
// to; it returns the rounds.
func hogLoop(from, to int64) int {
	sleepUntil(from)
	n := 0
	for {
		spin(int64(schedwait.HogSpin))
		if nanotime() >= to {
			return n
		}
		sleepUntil(nanotime() + int64(schedwait.HogSleep))
		n++
	}
}

// nice15Loop sleeps until from, then runs Nice15Run and sleeps the next of
// sleeps until to; it returns the rounds.
func nice15Loop(from, to int64, sleeps []int64) int {
	sleepUntil(from)
	n := 0
	for n < len(sleeps) {
		spin(int64(schedwait.Nice15Run))
		if nanotime() >= to {
			break
		}
		sleepUntil(nanotime() + sleeps[n])
		n++
	}
	return n
}

// offCPU is the step between two clock reads of spin beyond which the
// thread was not running in between (preempted, interrupted, or its vCPU
// not running): one read takes some tens of ns.
const offCPU = 10 * time.Microsecond

// spin runs d ns on the CPU in user mode, as the sim's ChargeUser: it
// sums the steps of the vDSO's CLOCK_MONOTONIC below offCPU. It makes no
// system call: clock_gettime(CLOCK_THREAD_CPUTIME_ID) would, and its
// task_sched_runtime() calls update_curr() each time, a check of the
// slice (and reschedule) at every read where the kernel, like the sim,
// checks a user-mode spinner's only at the tick.
//
//go:nosplit
func spin(d int64) {
	var ran int64
	last := nanotime()
	for ran < d {
		now := nanotime()
		if step := now - last; step < int64(offCPU) {
			ran += step
		}
		last = now
	}
}

// nanotime is the runtime's CLOCK_MONOTONIC in ns, read through the vDSO
// (runtime.nanotime1), nosplit: the trace clock "mono".
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// sleepUntil is clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) to ns,
// again after a signal; a relative sleep is one to now plus its length, as
// the kernel's hrtimer_nanosleep makes it.
//
//go:nosplit
func sleepUntil(ns int64) {
	ts := unix.Timespec{Sec: ns / 1e9, Nsec: ns % 1e9}
	for {
		_, _, e := syscall.RawSyscall6(unix.SYS_CLOCK_NANOSLEEP, unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		if e != syscall.EINTR {
			return
		}
	}
}
