package forkstall

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"unsafe"

	"golang.org/x/sys/unix"
)

// The environment variable that turns a re-executed mmlab (or test binary)
// into one of the experiment's helper processes.
const roleEnv = "MMLAB_FORKSTALL_ROLE"

// ChildMain runs a helper role and exits if this process was started as one;
// otherwise it returns at once. mmlab's main and the tests' TestMain call it
// first thing.
func ChildMain() {
	role := os.Getenv(roleEnv)
	if role == "" {
		return
	}
	n, _ := strconv.ParseUint(os.Getenv(roleEnv+"_ARG"), 10, 64)
	switch role {
	case "busy":
		busy(n, os.Getenv(roleEnv+"_FORK") == "1")
	case "forker":
		forker()
	case "holder":
		holder(int(n))
	case "probe-sites":
		// Never run: keeps the probe sites in the binary.
		for _, f := range probeSites {
			f()
		}
	}
	fmt.Fprintf(os.Stderr, "forkstall: unknown role %q\n", role)
	os.Exit(2)
}

// pin binds the calling OS thread (the goroutine must be locked to it) to cpu,
// modulo the machine's CPU count.
func pin(cpu int) {
	var set unix.CPUSet
	set.Set(cpu % runtime.NumCPU())
	_ = unix.SchedSetaffinity(0, &set)
}

// busy loops mmap(size, MAP_POPULATE)/munmap on CPU 0, writing one record
// (start, duration of the populate) per cycle to stdout; with forks set a
// second thread loops fork() with a 1 ms pause, as the research's `busy -F`.
func busy(size uint64, forks bool) {
	if forks {
		go func() {
			runtime.LockOSThread()
			pin(0) // the whole busy process stays on CPU 0, as in the research runs
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
	pin(0)
	out := os.Stdout
	for {
		t0 := monotonicNs()
		b, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
		if err != nil {
			fmt.Fprintf(os.Stderr, "busy: mmap %d bytes: %s\n", size, unix.ErrnoName(err.(syscall.Errno)))
			os.Exit(1)
		}
		writeRecord(out, forkRecord{t0, monotonicNs() - t0})
		_ = unix.Munmap(b)
	}
}

// forker loops fork() on CPU 1 and writes (start, duration) of each to stdout.
func forker() {
	runtime.LockOSThread()
	pin(1)
	out := os.Stdout
	for {
		t0 := monotonicNs()
		pid, e := rawFork(false)
		d := monotonicNs() - t0
		if e != 0 {
			fmt.Fprintf(os.Stderr, "forker: fork: %s\n", unix.ErrnoName(e))
			os.Exit(1)
		}
		writeRecord(out, forkRecord{t0, d})
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, 0, nil)
	}
}

// holder forks n children that sleep until it dies, then says "ready".
func holder(n int) {
	runtime.LockOSThread()
	for i := 0; i < n; i++ {
		if _, e := rawFork(true); e != 0 {
			fmt.Fprintf(os.Stderr, "holder: fork %d of %d: %s\n", i, n, unix.ErrnoName(e))
			os.Exit(1)
		}
	}
	fmt.Println("ready")
	for {
		_ = unix.Pause()
	}
}

func writeRecord(w io.Writer, r forkRecord) {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(r.start))
	binary.LittleEndian.PutUint64(b[8:], uint64(r.dur))
	if _, err := w.Write(b[:]); err != nil {
		os.Exit(0) // the experiment is gone
	}
}

// recorder collects the records a helper writes to its stdout.
type recorder struct {
	mu   sync.Mutex // protects recs
	recs []forkRecord
	done chan struct{}
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
			rec.recs = append(rec.recs, forkRecord{int64(binary.LittleEndian.Uint64(b[:8])), int64(binary.LittleEndian.Uint64(b[8:]))})
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
		ok := len(r.recs) > 0 && r.recs[len(r.recs)-1].start > t
		r.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-r.done:
			return errors.New("helper process died")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// procs are the helper processes of one run; kill ends them all.
type procs struct{ cmds []*exec.Cmd }

func (p *procs) start(path, role string, arg uint64, fork bool) (io.Reader, error) {
	cmd := exec.Command(path)
	cmd.Env = append(os.Environ(), roleEnv+"="+role, roleEnv+"_ARG="+strconv.FormatUint(arg, 10))
	if fork {
		cmd.Env = append(cmd.Env, roleEnv+"_FORK=1")
	}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s helper: %w", role, err)
	}
	p.cmds = append(p.cmds, cmd)
	return out, nil
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

// execDir returns a fresh temporary directory on a filesystem that allows
// exec, for the probed copy of the binary.
func execDir() (string, error) {
	cands := []string{os.TempDir()}
	if d, err := os.UserCacheDir(); err == nil {
		cands = append(cands, d)
	}
	for _, base := range cands {
		var st unix.Statfs_t
		if unix.Statfs(base, &st) == nil && st.Flags&unix.ST_NOEXEC == 0 {
			return os.MkdirTemp(base, "mmlab-forkstall-")
		}
	}
	return "", errors.New("no temporary directory on a filesystem that allows exec")
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

// RunLive runs the experiment on the live kernel. Everything it starts is
// gone when it returns, on error and on cancellation too.
func RunLive(ctx context.Context, o Options) (res *Result, err error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the live forkstall experiment needs root (uprobes need CAP_SYS_ADMIN/CAP_BPF)")
	}
	dir, err := execDir()
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	probed, err := copyExe(dir)
	if err != nil {
		return nil, fmt.Errorf("copy the mmlab binary for probing: %w", err)
	}
	offsets, err := probeOffsets(Probes(o.Mode))
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
	forkerPath := self
	switch o.Case {
	case CaseBusyMaps:
		out, err := ps.start(probed, "busy", o.Size, false)
		if err != nil {
			return nil, err
		}
		if err := firstCycle(ctx, newRecorder(out)); err != nil {
			return nil, fmt.Errorf("busy process: %w", err)
		}
	case CaseBusyForks:
		out, err := ps.start(self, "busy", o.Size, true)
		if err != nil {
			return nil, err
		}
		if err := firstCycle(ctx, newRecorder(out)); err != nil {
			return nil, fmt.Errorf("busy process: %w", err)
		}
		forkerPath = probed
	case CaseIdle1000, CaseIdle5000:
		n := uint64(1000)
		if o.Case == CaseIdle5000 {
			n = 5000
		}
		out, err := ps.start(probed, "holder", n, false)
		if err != nil {
			return nil, err
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "ready\n" {
			return nil, fmt.Errorf("holder of %d idle processes did not start (%v)", n, err)
		}
	}
	out, err := ps.start(forkerPath, "forker", 0, false)
	if err != nil {
		return nil, err
	}
	forks := newRecorder(out)

	res = &Result{Case: o.Case, Mode: o.Mode, Size: o.Size}
	if o.Case == CaseIdle1000 || o.Case == CaseIdle5000 {
		res.Size = 0
	}
	for i := 0; i < o.Runs; i++ {
		run, err := oneRun(ctx, &o, probed, offsets, forks)
		if err != nil {
			return nil, fmt.Errorf("run %d: %w", i+1, err)
		}
		res.Runs = append(res.Runs, run)
		if o.Progress != nil {
			o.Progress("%s %s run %d/%d: fork_max %.1f ms (baseline %.1f ms), attach %.1f ms, detach %.1f ms",
				o.Case, o.Mode, i+1, o.Runs, run.ForkMaxMs, run.BaselineMs, run.AttachMs, run.DetachMs)
		}
	}
	return res, nil
}

// firstCycle waits for the busy process's first populate to finish, so runs
// start with it in its steady state.
func firstCycle(ctx context.Context, r *recorder) error {
	return r.waitPast(ctx, 0)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// oneRun attaches, holds, detaches, pauses, then keeps a baseline window of
// the same total length with nothing attaching.
func oneRun(ctx context.Context, o *Options, path string, offsets []uint64, forks *recorder) (Run, error) {
	var run Run
	a0 := monotonicNs()
	detach, err := o.Attach(ctx, path, offsets, o.Mode)
	a1 := monotonicNs()
	if err != nil {
		return run, err
	}
	holdErr := sleepCtx(ctx, o.Hold)
	d0 := monotonicNs()
	detErr := detach()
	d1 := monotonicNs()
	if holdErr != nil {
		return run, holdErr
	}
	if detErr != nil {
		return run, fmt.Errorf("detach: %w", detErr)
	}
	if err := sleepCtx(ctx, o.Gap); err != nil {
		return run, err
	}
	b0 := monotonicNs()
	if err := sleepCtx(ctx, time.Duration((a1-a0)+(d1-d0))); err != nil {
		return run, err
	}
	b1 := monotonicNs()
	if err := forks.waitPast(ctx, b1); err != nil {
		return run, fmt.Errorf("forker: %w", err)
	}
	recs := forks.snapshot()
	fmax, n := longestIn(recs, [2]int64{a0, a1}, [2]int64{d0, d1})
	bmax, _ := longestIn(recs, [2]int64{b0, b1})
	run = Run{
		ForkMaxMs: float64(fmax) / 1e6, BaselineMs: float64(bmax) / 1e6,
		AttachMs: float64(a1-a0) / 1e6, DetachMs: float64(d1-d0) / 1e6, Forks: n,
	}
	return run, sleepCtx(ctx, o.Gap)
}
