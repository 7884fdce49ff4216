package forkstall

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"mmlab/experiment"
	"mmlab/experiment/forkstall"
	"mmlab/host"
	"mmlab/live"
	"mmlab/live/uprobe"
	"mmlab/uapi"
)

// The helper roles (live.RegisterRole) and the environment variable that
// passes each its argument.
const (
	roleBusy   = "forkstall-busy"   // MMLAB_FORKSTALL_ARG: the populate size; MMLAB_FORKSTALL_FORK=1: a thread forks
	roleHolder = "forkstall-holder" // MMLAB_FORKSTALL_ARG: how many idle processes
	argEnv     = "MMLAB_FORKSTALL_ARG"
	forkEnv    = "MMLAB_FORKSTALL_FORK"
)

func init() {
	live.RegisterRole(roleBusy, func() int { return busy(argUint(), os.Getenv(forkEnv) == "1") })
	live.RegisterRole(roleHolder, func() int { return holder(int(argUint())) })
}

func argUint() uint64 {
	n, _ := strconv.ParseUint(os.Getenv(argEnv), 10, 64)
	return n
}

// pin binds the calling OS thread (the goroutine must be locked to it) to cpu,
// modulo the machine's CPU count.
func pin(cpu int) {
	_ = host.Pin(cpu % runtime.NumCPU())
}

// busy loops mmap(size, MAP_POPULATE)/munmap on forkstall.BusyCPU, writing
// one record (start, duration of the populate) per cycle to stdout; with
// forks set a second thread loops fork() with a 1 ms pause on
// forkstall.BusyForkCPU. It returns when the experiment stops reading its
// records.
func busy(size uint64, forks bool) int {
	if forks {
		go func() {
			runtime.LockOSThread()
			pin(forkstall.BusyForkCPU)
			for {
				if pid, e := rawFork(false); e == 0 {
					var ws syscall.WaitStatus
					_, _ = syscall.Wait4(pid, &ws, 0, nil)
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	runtime.LockOSThread()
	pin(forkstall.BusyCPU)
	out := os.Stdout
	for {
		t0 := monotonicNs()
		b, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
		if err != nil {
			fmt.Fprintf(os.Stderr, "busy: mmap %d bytes: %s\n", size, unix.ErrnoName(err.(syscall.Errno)))
			return 1
		}
		if writeRecord(out, forkRecord{Start: t0, Dur: monotonicNs() - t0}) != nil {
			return 0
		}
		_ = unix.Munmap(b)
	}
}

// holder forks n children that sleep until it dies, then says "ready" and
// sleeps until killed.
func holder(n int) int {
	runtime.LockOSThread()
	for i := 0; i < n; i++ {
		if _, e := rawFork(true); e != 0 {
			fmt.Fprintf(os.Stderr, "holder: fork %d of %d: %s\n", i, n, unix.ErrnoName(e))
			return 1
		}
	}
	fmt.Println("ready")
	for {
		_ = unix.Pause()
	}
}

// writeRecord writes r as the fork helper does; it fails once the
// experiment is gone.
func writeRecord(w io.Writer, r forkRecord) error {
	var b [16]byte
	_, err := w.Write(r.Append(b[:0]))
	return err
}

// recorder collects the records a helper writes to its stdout.
type recorder struct {
	mu   sync.Mutex // protects recs
	recs []forkRecord
	done chan struct{}
	// exited, if set, waits for the helper once its stdout has ended and
	// says how it exited.
	exited func() error
}

func newRecorder(r io.Reader) *recorder {
	rec := &recorder{done: make(chan struct{})}
	go func() {
		defer close(rec.done)
		br := bufio.NewReader(r)
		var b [16]byte
		for {
			if _, err := io.ReadFull(br, b[:]); err != nil {
				return
			}
			rec.mu.Lock()
			rec.recs = append(rec.recs, live.ParseForkRecord(b[:]))
			rec.mu.Unlock()
		}
	}()
	return rec
}

func (r *recorder) snapshot() []forkRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]forkRecord(nil), r.recs...)
}

// waitPast waits until a record that started after t arrives: every fork that
// started before t has then been reported.
func (r *recorder) waitPast(ctx context.Context, t int64) error {
	for {
		r.mu.Lock()
		ok := len(r.recs) > 0 && r.recs[len(r.recs)-1].Start > t
		r.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-r.done:
			if ctx.Err() != nil {
				return ctx.Err() // the helper was killed for it
			}
			if r.exited != nil {
				if err := r.exited(); err != nil {
					return fmt.Errorf("helper process died: %w", err)
				}
			}
			return errors.New("helper process died")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// procs are the helper processes of one run; kill ends them all.
type procs struct{ cmds []*exec.Cmd }

// start runs the executable at path (mmlab itself or its probed copy) in
// role, with env added, and returns its stdout.
func (p *procs) start(ctx context.Context, path, role string, env ...string) (io.Reader, error) {
	cmd, err := live.Command(ctx, role, env...)
	if err != nil {
		return nil, err
	}
	cmd.Path = path
	return p.run(cmd, role+" helper")
}

// run starts cmd, a helper named what, in a process group of its own with
// live.Start, and returns its stdout.
func (p *procs) run(cmd *exec.Cmd, what string) (io.Reader, error) {
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := live.Start(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", what, err)
	}
	p.cmds = append(p.cmds, cmd)
	return out, nil
}

// forkerCPU is the CPU the forker pins itself to: the one pin would pin a
// helper to, or -1 (not pinned, as a helper whose pin fails runs) where
// this process may not run on it or the helper cannot name it (64 and
// over).
func forkerCPU() int {
	cpu := forkstall.ForkerCPU % runtime.NumCPU()
	allowed, err := host.CPUs()
	if err != nil || !slices.Contains(allowed, cpu) || cpu >= 64 {
		return -1
	}
	return cpu
}

// startForker writes the fork helper of h (live.ForkHelperELF) into
// dir, the run's directory, runs it and returns the recorder of its
// forks, which names the errno of a call that failed in it. The forker
// is that helper, not a re-execution of mmlab, so that live and the
// simulation fork the same process: one page of text (and in busy-forks
// the probed file mapped), a stack, no threads, no heap; the process
// whose fork calibrate measures. It dies with this process
// (PR_SET_PDEATHSIG, live.Start) or when its stdout is closed (SIGPIPE).
func (p *procs) startForker(ctx context.Context, dir string, h live.ForkHelper) (*recorder, error) {
	if runtime.GOARCH != "amd64" {
		return nil, live.Unsupported("the forker is x86-64 code; this is %s", runtime.GOARCH)
	}
	path := filepath.Join(dir, "forker")
	if err := os.WriteFile(path, live.ForkHelperELF(h), 0o755); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, path)
	cmd.Env = []string{}
	out, err := p.run(cmd, "the forker")
	if err != nil {
		return nil, err
	}
	rec := newRecorder(out)
	rec.exited = func() error { return live.ForkHelperExit(cmd.Wait()) }
	return rec, nil
}

// kill ends every helper and everything it forked (each helper leads its own
// process group, which its children inherit), and waits until the groups are
// empty, so nothing of the run outlives it.
func (p *procs) kill() {
	for _, c := range p.cmds {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		_ = c.Wait()
	}
	for _, c := range p.cmds {
		for i := 0; i < 1000 && syscall.Kill(-c.Process.Pid, 0) == nil; i++ {
			time.Sleep(10 * time.Millisecond)
		}
	}
	p.cmds = nil
}

// dirPrefix starts the name of the directory of each run's probed copy;
// the run's live.RunName follows, so that the next run can remove the
// directory of one that was killed (live.SweepExecTemp).
const dirPrefix = "mmlab-forkstall-"

func init() {
	live.RegisterSweeper(func() []string { return live.SweepExecTemp(dirPrefix) })
}

// copyExe copies the running executable to dir and returns its path.
func copyExe(dir string) (string, error) {
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		return "", err
	}
	defer src.Close()
	dst := filepath.Join(dir, "mmlab-probed")
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(f, src); err != nil {
		f.Close()
		return "", err
	}
	return dst, f.Close()
}

// probeOffsets returns the file offsets of the first n probe sites in the
// running executable, found through the address of each function and the
// mapping of the executable that holds it. (go run and go test strip the
// symbol table, so ELF symbols are not there to ask.) Each offset is checked
// against the file's bytes.
func probeOffsets(n int) ([]uint64, error) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return nil, err
	}
	f, err := os.Open(exe)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var offs []uint64
	for _, site := range probeSites[:n] {
		// A func value points at a funcval whose first word is the code address.
		code := *(*unsafe.Pointer)(*(*unsafe.Pointer)(unsafe.Pointer(&site)))
		addr := uint64(uintptr(code))
		off, ok := exeOffset(string(maps), exe, addr)
		if !ok {
			return nil, fmt.Errorf("probe site at %#x is in no mapping of %s", addr, exe)
		}
		want := unsafe.Slice((*byte)(code), 16)
		got := make([]byte, 16)
		if _, err := f.ReadAt(got, int64(off)); err != nil || !bytes.Equal(got, want) {
			return nil, fmt.Errorf("%s at offset %#x does not hold the probe site's code", exe, off)
		}
		offs = append(offs, off)
	}
	return offs, nil
}

// exeOffset finds the file offset of addr in a /proc/PID/maps text, among the
// lines that map path.
func exeOffset(maps, path string, addr uint64) (uint64, bool) {
	for line := range strings.Lines(maps) {
		f := strings.Fields(line)
		if len(f) < 6 || f[5] != path {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		pgoff, err3 := strconv.ParseUint(f[2], 16, 64)
		if err1 == nil && err2 == nil && err3 == nil && addr >= start && addr < end {
			return addr - start + pgoff, true
		}
	}
	return 0, false
}

// Attacher attaches the probes of mode at offsets of the executable file at
// path and returns the function that detaches them: attachUprobes, or a
// test's own.
type Attacher func(ctx context.Context, path string, offsets []uint64, mode string) (detach func() error, err error)

// attachUprobes attaches the probes with the live uprobe package: one
// uprobe_multi link for the multi modes, perf-event uprobes for perf-4.
func attachUprobes(ctx context.Context, path string, offsets []uint64, mode string) (func() error, error) {
	m := uapi.AttachMulti
	if mode == forkstall.ModePerf4 {
		m = uapi.AttachPerf
	}
	p, err := uprobe.Attach(ctx, uprobe.Spec{Path: path, Offsets: offsets, Mode: m})
	if err != nil {
		return nil, err
	}
	return p.Close, nil
}

// Run runs the experiment on the live kernel: each case and mode of o in
// turn. Everything it starts is gone when it returns, on error and on
// cancellation too. It also records the verdict in the params (Options.Verdict and
// VerdictLine), where schema-1 documents had it.
func Run(ctx context.Context, o *forkstall.Options, env experiment.Env, emit func(forkstall.Result)) error {
	if !live.IsRoot() {
		return live.Unsupported("the live forkstall experiment needs root (uprobes need CAP_SYS_ADMIN/CAP_BPF)")
	}
	if err := uprobe.Supported(); err != nil {
		if !errors.Is(err, live.ErrNotSupported) {
			err = live.Unsupported("%v", err)
		}
		return err
	}
	var rs []forkstall.Result
	for _, c := range o.Cases {
		for _, m := range o.Modes {
			runs, err := runCase(ctx, caseRun{Case: c, Mode: m, Runs: o.Runs, Size: uint64(o.Size),
				Hold: hold, Gap: gap, Attach: attachUprobes, Progress: env.Progress})
			if err != nil {
				return fmt.Errorf("%s %s: %w", c, m, err)
			}
			r := forkstall.NewResult(experiment.LiveRow, c, m, uint64(o.Size), runs)
			emit(r)
			rs = append(rs, r)
		}
	}
	o.Verdict, o.VerdictLine = forkstall.LiveVerdict(rs)
	return nil
}

// caseRun is one live run of one case and mode.
type caseRun struct {
	Case, Mode string
	Runs       int
	Size       uint64        // bytes the busy process populates each time
	Hold       time.Duration // how long probes stay attached
	Gap        time.Duration // pause after a detach and after a baseline window
	Attach     Attacher
	// Progress, if set, is told about each run as it ends.
	Progress func(format string, args ...any)
}

// runCase runs o.Runs cycles of one case and mode. Everything it starts is
// gone when it returns, on error and on cancellation too.
func runCase(ctx context.Context, o caseRun) ([]forkstall.Run, error) {
	dir, err := live.MkdirExecTemp(dirPrefix)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if hooks.probedDir != nil {
		hooks.probedDir(dir)
	}
	probed, err := copyExe(dir)
	if err != nil {
		return nil, fmt.Errorf("copy the mmlab binary for probing: %w", err)
	}
	offsets, err := probeOffsets(forkstall.Probes(o.Mode))
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var ps procs
	defer ps.kill()

	// Who runs which binary decides who maps the probed file.
	forker := live.ForkHelper{CPU: forkerCPU()}
	size := argEnv + "=" + strconv.FormatUint(uint64(o.Size), 10)
	switch o.Case {
	case forkstall.CaseBusyMaps:
		out, err := ps.start(ctx, probed, roleBusy, size)
		if err != nil {
			return nil, err
		}
		if err := firstCycle(ctx, newRecorder(out)); err != nil {
			return nil, fmt.Errorf("busy process: %w", err)
		}
	case forkstall.CaseBusyForks:
		out, err := ps.start(ctx, self, roleBusy, size, forkEnv+"=1")
		if err != nil {
			return nil, err
		}
		if err := firstCycle(ctx, newRecorder(out)); err != nil {
			return nil, fmt.Errorf("busy process: %w", err)
		}
		fi, err := os.Stat(probed)
		if err != nil {
			return nil, err
		}
		forker.File, forker.FileLen = probed, uint32(fi.Size())
	case forkstall.CaseIdle1000, forkstall.CaseIdle5000:
		n := forkstall.Idle(o.Case)
		out, err := ps.start(ctx, probed, roleHolder, argEnv+"="+strconv.Itoa(n))
		if err != nil {
			return nil, err
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "ready\n" {
			return nil, fmt.Errorf("holder of %d idle processes did not start (%v)", n, err)
		}
	default:
		return nil, fmt.Errorf("unknown case %q", o.Case)
	}
	forks, err := ps.startForker(ctx, dir, forker)
	if err != nil {
		return nil, err
	}

	var runs []forkstall.Run
	for i := 0; i < o.Runs; i++ {
		run, err := oneRun(ctx, &o, probed, offsets, forks)
		if err != nil {
			return nil, fmt.Errorf("run %d: %w", i+1, err)
		}
		runs = append(runs, run)
		if o.Progress != nil {
			o.Progress("%s %s run %d/%d: fork_max %.1f ms (baseline %.1f ms), attach %.1f ms, detach %.1f ms",
				o.Case, o.Mode, i+1, o.Runs, run.ForkMaxMs, run.BaselineMs, run.AttachMs, run.DetachMs)
		}
	}
	return runs, nil
}

// firstCycle waits for the busy process's first populate to finish, so runs
// start with it in its steady state.
func firstCycle(ctx context.Context, r *recorder) error {
	return r.waitPast(ctx, 0)
}

// endWindow ends the window that began at from: with hooks.forkInEveryWindow
// it first waits for a fork that started inside it to be recorded. It
// returns the window's end.
func endWindow(ctx context.Context, forks *recorder, from int64) (int64, error) {
	if hooks.forkInEveryWindow {
		if err := forks.waitPast(ctx, from); err != nil {
			return 0, fmt.Errorf("forker: %w", err)
		}
	}
	return monotonicNs(), nil
}

// oneRun attaches, holds, detaches, pauses, then keeps a baseline window of
// the same total length with nothing attaching.
func oneRun(ctx context.Context, o *caseRun, path string, offsets []uint64, forks *recorder) (forkstall.Run, error) {
	var run forkstall.Run
	a0 := monotonicNs()
	detach, err := o.Attach(ctx, path, offsets, o.Mode)
	if err != nil {
		return run, err
	}
	a1, err := endWindow(ctx, forks, a0)
	if err != nil {
		return run, errors.Join(err, detach())
	}
	holdErr := experiment.Sleep(ctx, o.Hold)
	d0 := monotonicNs()
	detErr := detach()
	d1, err := endWindow(ctx, forks, d0)
	if err != nil {
		return run, err
	}
	if holdErr != nil {
		return run, holdErr
	}
	if detErr != nil {
		return run, fmt.Errorf("detach: %w", detErr)
	}
	if err := experiment.Sleep(ctx, o.Gap); err != nil {
		return run, err
	}
	b0 := monotonicNs()
	if err := experiment.Sleep(ctx, time.Duration((a1-a0)+(d1-d0))); err != nil {
		return run, err
	}
	b1, err := endWindow(ctx, forks, b0)
	if err != nil {
		return run, err
	}
	if err := forks.waitPast(ctx, b1); err != nil {
		return run, fmt.Errorf("forker: %w", err)
	}
	recs := forks.snapshot()
	fmax, n := longestIn(recs, [2]int64{a0, a1}, [2]int64{d0, d1})
	bmax, _ := longestIn(recs, [2]int64{b0, b1})
	run = forkstall.Run{
		ForkMaxMs: float64(fmax) / 1e6, BaselineMs: float64(bmax) / 1e6,
		AttachMs: float64(a1-a0) / 1e6, DetachMs: float64(d1-d0) / 1e6, Forks: n,
	}
	return run, experiment.Sleep(ctx, o.Gap)
}

// forkRecord is one fork the forker timed, or one populate of the busy
// process, on CLOCK_MONOTONIC: the fork helper's record.
type forkRecord = live.ForkRecord

// longestIn returns the longest fork that started in any of the windows
// [a, b) and how many started there.
func longestIn(forks []forkRecord, windows ...[2]int64) (maxNs int64, n int) {
	for _, f := range forks {
		if slices.ContainsFunc(windows, func(w [2]int64) bool { return f.Start >= w[0] && f.Start < w[1] }) {
			n++
			maxNs = max(maxNs, f.Dur)
		}
	}
	return maxNs, n
}
