package mapscan

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"mmlab/experiment"
	"mmlab/experiment/mapscan"
	"mmlab/live"
	"mmlab/live/tracefs"
)

// hooks are the package's test hooks (export_linux_test.go).
var hooks struct {
	traceStarted func() // in runOnce, once the helpers are ready and the trace is set up
}

// helperProc is one helper process.
type helperProc struct {
	*live.Helper
	tid int // the thread that does its work ("ready TID")
}

func startHelper(ctx context.Context, role string, env ...string) (*helperProc, error) {
	cmd, err := live.Command(ctx, role, append([]string{"GOGC=off", "GOMAXPROCS=2"}, env...)...)
	if err != nil {
		return nil, fmt.Errorf("mapscan: %w", err)
	}
	lh, err := live.StartHelper(cmd)
	if err != nil {
		return nil, fmt.Errorf("mapscan: starting the %s: %w", role, err)
	}
	h := &helperProc{Helper: lh}
	tid, err := h.Expect("ready")
	if err == nil {
		h.tid, err = strconv.Atoi(tid)
	}
	if err != nil {
		h.Kill()
		return nil, fmt.Errorf("mapscan: the %s did not start: %w", role, err)
	}
	return h, nil
}

// Run runs the benchmark on the running kernel: o.Runs runs of each case,
// emitting each case's summary.
func Run(ctx context.Context, o *mapscan.Options, env experiment.Env, emit func(mapscan.Result)) error {
	if runtime.NumCPU() < 2 {
		return live.Unsupported("the helpers run on CPUs 0 and 1: needs 2 CPUs, this machine has %d", runtime.NumCPU())
	}
	return mapscan.RunCases(ctx, o, experiment.LiveRow, runOnce, emit)
}

// runOnce runs one live run: the mapper for o.Duration with o.Scanners
// scanners. Every helper is gone when it returns, on error or cancellation
// too.
func runOnce(ctx context.Context, o mapscan.RunSpec) (mapscan.Stats, error) {
	if err := o.Check(); err != nil {
		return mapscan.Stats{}, err
	}
	var helpers []*helperProc
	defer func() {
		for _, h := range helpers {
			h.Kill()
		}
	}()
	mapper, err := startHelper(ctx, roleMapper)
	if err != nil {
		return mapscan.Stats{}, err
	}
	helpers = append(helpers, mapper)
	var scanners []*helperProc
	if o.Scanners != "none" {
		// As proc-vs-map.sh: the scanners first, then their busy-waiters.
		cpus := mapscan.ScannerCPUs(runtime.NumCPU())
		for i := range mapscan.NumScanners {
			s, err := startHelper(ctx, roleScanner, pidEnv+"="+strconv.Itoa(mapper.Cmd.Process.Pid), kindEnv+"="+o.Scanners, cpuEnv+"="+strconv.Itoa(cpus[i]))
			if err != nil {
				return mapscan.Stats{}, err
			}
			helpers = append(helpers, s)
			scanners = append(scanners, s)
		}
		for i := range mapscan.NumScanners {
			busy, err := startHelper(ctx, roleBusy, busyEnv+"="+strconv.FormatInt(o.BusyDuration.Nanoseconds(), 10), cpuEnv+"="+strconv.Itoa(cpus[i]))
			if err != nil {
				return mapscan.Stats{}, err
			}
			helpers = append(helpers, busy)
		}
	}
	tids := []int{mapper.tid}
	for _, s := range scanners {
		tids = append(tids, s.tid)
	}
	tr, note := startLockTrace(tids)
	defer func() {
		if tr != nil {
			tr.Close()
		}
	}()
	if hooks.traceStarted != nil {
		hooks.traceStarted()
	}
	if _, err := fmt.Fprintf(mapper.In, "go %d %d\n", o.Duration.Nanoseconds(), o.Seed); err != nil {
		return mapscan.Stats{}, fmt.Errorf("mapscan: mapper: %w", err)
	}
	line, err := mapper.ExpectContext(ctx, "stats")
	if err != nil && err == ctx.Err() {
		return mapscan.Stats{}, err // the deferred kills end the helpers
	}
	if err != nil {
		return mapscan.Stats{}, fmt.Errorf("mapscan: mapper: %w", err)
	}
	var rep mapperReport
	if err := json.Unmarshal([]byte(line), &rep); err != nil {
		return mapscan.Stats{}, fmt.Errorf("mapscan: mapper's stats: %w", err)
	}
	st := rep.Stats
	if tr != nil {
		rep.Span.Scanners = tids[1:]
		note = readLockTrace(tr, rep.Span, &st)
	}
	if note != "" {
		st.LockTraceNote = "no lock tracepoints: " + note
	}
	st.HostNote = damonNote(damonRoot)
	for _, s := range scanners {
		s.Cmd.Process.Signal(syscall.SIGTERM)
		rest, err := s.Expect("passes")
		if err != nil {
			return st, fmt.Errorf("mapscan: scanner: %w", err)
		}
		n, _ := strconv.Atoi(rest)
		st.ScanPasses += n
	}
	return st, nil
}

// startLockTrace creates the run's ftrace instance recording the lock
// tracepoints of the threads tids, and the mapper's (tids[0]'s) wake-ups
// by tasks; nil and why not if it cannot. The
// default buffer holds a run's events many times over: the mapper's and
// the scanners' rw_semaphore sleeps and the ends of their other lock
// waits, some thousands in a run of seconds; a loss is reported.
func startLockTrace(tids []int) (*tracefs.Instance, string) {
	tr, err := tracefs.New("mono")
	if err != nil {
		return nil, strings.TrimPrefix(err.Error(), live.ErrNotSupported.Error()+": ")
	}
	for _, step := range []func() error{
		func() error { return tr.SetOption("event-fork", true) }, // a text scanner's cats
		func() error { return tr.SetPIDs(tids...) },
		func() error { return tr.SetEvent(lockBegin, "filter", rwsemFlags) },
		func() error { return tr.SetEvent(lockBegin, "trigger", "stacktrace if "+rwsemFlags) },
		func() error { return tr.SetEvent(schedWaking, "filter", wakingFilter(tids[0])) },
		func() error { return tr.Enable(lockBegin, lockEnd, schedWaking) },
		tr.Start,
	} {
		if err = step(); err != nil {
			break
		}
	}
	if err != nil {
		tr.Close()
		return nil, err.Error()
	}
	return tr, ""
}

// readLockTrace stops tr and sets st's lock figures from its events; it
// returns why not if it cannot (events lost, or unreadable).
func readLockTrace(tr *tracefs.Instance, span lockSpan, st *mapscan.Stats) string {
	if err := tr.Stop(); err != nil {
		return err.Error()
	}
	evs, lost, err := tr.Events()
	if err == nil && lost > 0 {
		err = fmt.Errorf("%d trace events lost", lost)
	}
	var ws []lockWait
	if err == nil {
		ws, err = lockWaits(evs)
	}
	if err != nil {
		return err.Error()
	}
	span.figures(ws, wakings(evs), st)
	return ""
}
