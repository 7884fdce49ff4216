package replay

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"mmlab/live"
	"mmlab/machine"
	"mmlab/trace"
)

//go:embed csrc/helper.c
var helperSource []byte

// ccFlags build a position-independent executable, which the kernel loads
// in trace.ProcessZones (a fixed-address one would sit at 0x400000).
var ccFlags = []string{"-O2", "-Wall", "-fPIE", "-pie"}

// ErrNoCompiler is returned when there is no C compiler to build the helper;
// it wraps machine.ErrNotSupported.
var ErrNoCompiler error = &machine.UnsupportedError{What: "live replay needs a C compiler (cc): install gcc"}

// buildMu serializes building the helper within this process; rename makes
// concurrent builds by several processes safe.
var buildMu sync.Mutex

// helperPath returns the compiled helper, building it into
// os.UserCacheDir()/mmlab/ under a name keyed by the hash of its source and
// flags when it is not there yet.
func helperPath() (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	h := sha256.New()
	h.Write(helperSource)
	h.Write([]byte(strings.Join(ccFlags, " ")))
	name := "replay-helper-" + hex.EncodeToString(h.Sum(nil))[:16]
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "mmlab")
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		if cc, err = exec.LookPath("gcc"); err != nil {
			return "", ErrNoCompiler
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "helper.c")
	if err := os.WriteFile(src, helperSource, 0o644); err != nil {
		return "", err
	}
	out := filepath.Join(tmp, name)
	args := append(append([]string{}, ccFlags...), "-o", out, src)
	if msg, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the live replay helper with %s: %v\n%s", cc, err, msg)
	}
	if err := os.Rename(out, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// tracesDirPrefix starts the name of each run's directory of trace files
// (live.MkdirRunTemp), which the next run removes when a run was killed.
const tracesDirPrefix = "mmlab-replay-"

func init() {
	live.RegisterSweeper(func() []string { return live.SweepRunTemp([]string{os.TempDir()}, tracesDirPrefix) })
}

// Kinds of the helper's op table (enum in csrc/helper.c).
const (
	hMmap = iota
	hMunmap
	hMprotect
	hMremap
	hTouch
	hPoke
	hPeek
	hFork
	hExit
	hMaps
	hExec
	hWrite
)

// encode writes the helper's input: the arena, the directory and names of the
// files, and one numeric line per op (file ops are done by Run beforehand).
func encode(p *trace.Program, dir string) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "arena %d %d\ndir %s\n", p.ArenaLo, p.ArenaHi, dir)
	files := map[string]int{}
	var names []string
	type hop struct {
		kind, line, prot, flags, file   int
		addr, len, off, newlen, newaddr uint64
		value                           byte
		skip                            int
	}
	var ops []hop
	var forks []int // indexes in ops of the forks still open
	for _, o := range p.Ops {
		h := hop{line: o.Line, addr: o.Addr, len: o.Len, prot: int(o.Prot), file: -1}
		switch o.Kind {
		case trace.OpFile:
			if _, dup := files[o.File]; dup || strings.ContainsAny(o.File, "/ \n") || o.File == "" {
				return nil, fmt.Errorf("%d: bad or duplicate file name %q", o.Line, o.File)
			}
			files[o.File] = len(names)
			names = append(names, o.File)
			continue
		case trace.OpMmap:
			h.kind = hMmap
			h.flags = unix.MAP_PRIVATE
			if o.Shared {
				h.flags = unix.MAP_SHARED
			}
			switch {
			case o.Fixed && !o.NoReplace && !o.Hint:
				h.flags |= unix.MAP_FIXED
			case o.NoReplace && !o.Fixed && !o.Hint:
				h.flags |= unix.MAP_FIXED_NOREPLACE
			case o.Hint && !o.Fixed && !o.NoReplace: // ADDR is a hint
			default:
				return nil, fmt.Errorf("%d: mmap needs exactly one of fixed, noreplace or hint", o.Line)
			}
			if o.Populate {
				h.flags |= unix.MAP_POPULATE
			}
			if o.File == "" {
				h.flags |= unix.MAP_ANONYMOUS
			} else {
				i, ok := files[o.File]
				if !ok {
					return nil, fmt.Errorf("%d: file %q is not declared", o.Line, o.File)
				}
				h.file, h.off = i, o.Off
			}
		case trace.OpMunmap:
			h.kind = hMunmap
		case trace.OpMprotect:
			h.kind = hMprotect
		case trace.OpMremap:
			h.kind, h.newlen = hMremap, o.NewLen
			if o.MayMove {
				h.flags, h.newaddr = unix.MREMAP_MAYMOVE|unix.MREMAP_FIXED, o.NewAddr
			}
		case trace.OpTouch:
			h.kind = hTouch
		case trace.OpPoke:
			h.kind, h.value = hPoke, o.Value
		case trace.OpPeek:
			h.kind = hPeek
		case trace.OpExec:
			h.kind = hExec
		case trace.OpWrite:
			h.kind = hWrite
		case trace.OpFork:
			h.kind = hFork
			forks = append(forks, len(ops))
		case trace.OpExit:
			if len(forks) == 0 {
				return nil, fmt.Errorf("%d: exit with no process to return to", o.Line)
			}
			h.kind = hExit
			ops[forks[len(forks)-1]].skip = len(ops) + 1
			forks = forks[:len(forks)-1]
		case trace.OpMaps:
			h.kind = hMaps
		default:
			return nil, fmt.Errorf("%d: unknown op kind %d", o.Line, o.Kind)
		}
		ops = append(ops, h)
	}
	for _, f := range forks { // forks whose child runs to the end of the trace
		ops[f].skip = len(ops)
	}
	fmt.Fprintf(&b, "files %d\n", len(names))
	for _, n := range names {
		fmt.Fprintf(&b, "%s\n", n)
	}
	fmt.Fprintf(&b, "ops %d\n", len(ops))
	var line []byte
	for _, h := range ops {
		line = line[:0]
		// FILE is sent plus one, so that 0 means anonymous and every field
		// is unsigned.
		for _, v := range []uint64{uint64(h.kind), uint64(h.line), h.addr, h.len, uint64(h.prot),
			uint64(h.flags), uint64(h.file + 1), h.off, h.newlen, h.newaddr, uint64(h.value), uint64(h.skip)} {
			line = strconv.AppendUint(line, v, 10)
			line = append(line, ' ')
		}
		line[len(line)-1] = '\n'
		b.Write(line)
	}
	return b.Bytes(), nil
}

// makeFiles creates the trace's files in dir: byte i of each is i % 251.
func makeFiles(p *trace.Program, dir string) error {
	for _, o := range p.Ops {
		if o.Kind != trace.OpFile {
			continue
		}
		if err := makeFile(filepath.Join(dir, o.File), o.Size); err != nil {
			return err
		}
	}
	return nil
}

// makeFile writes a trace file of size bytes, a page at a time.
func makeFile(path string, size uint64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 64*1024)
	for i := range size {
		_ = w.WriteByte(trace.FileByte(i)) // the error comes back from Flush
	}
	err = w.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

var subreaper sync.Once

// Run runs p on the live kernel in a fresh process and writes its output
// (maps, peek and error lines, as trace.Language says) to stdout as they come.
// An op the kernel refuses is part of the output, not an error: Run returns
// an error only when the trace cannot run (no C compiler, a helper that dies)
// or ctx is cancelled, and then nothing it started or created is left.
// Run refuses exactly the traces trace.Parse refuses and those that do not
// fit this machine (Program.ValidateFor with machine.Host()); a helper process that
// finds its stack in the arena (trace.StackZoneLo) prints nothing and Run
// starts another, up to busyRuns of them.
//
// Run makes the calling process a child subreaper (PR_SET_CHILD_SUBREAPER),
// so that the helper's forked children, orphaned when the helper is killed,
// are reaped here rather than left to init.
func Run(ctx context.Context, p *trace.Program, stdout io.Writer) error {
	if err := p.ValidateFor(machine.Host().Features); err != nil {
		return err
	}
	bin, err := helperPath()
	if err != nil {
		return err
	}
	dir, err := live.MkdirRunTemp(os.TempDir(), tracesDirPrefix)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// /proc/PID/maps shows the path with symlinks resolved; the helper
	// must know that form to print the bare NAME.
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	if err := makeFiles(p, dir); err != nil {
		return err
	}
	input, err := encode(p, dir)
	if err != nil {
		return err
	}
	subreaper.Do(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) })
	var busy string
	for attempt := range busyRuns {
		in := input
		if hooks.input != nil {
			in = hooks.input(attempt, input)
		}
		var err error
		if busy, err = runHelper(ctx, bin, in, stdout); busy == "" {
			return err
		}
	}
	return fmt.Errorf("in %d processes in a row, the arena held the helper's own %s"+
		" (is /proc/sys/kernel/randomize_va_space 0 or /proc/sys/vm/legacy_va_layout 1?)", busyRuns, busy)
}

// busyRuns is how many fresh helper processes Run tries when each finds a
// mapping of its own (its stack) in the arena. trace.Parse keeps an arena
// to at most trace.MaxStackZoneArena of the 16 GiB where the stack lies at
// random, so one run finds it there with a chance of at most 1 in 16.
const busyRuns = 10

// hooks are set by tests: input rewrites the helper's input of one attempt.
var hooks struct {
	input func(attempt int, in []byte) []byte
}

// runHelper runs the helper once on input, copying its output to stdout.
// When the helper finds a mapping of its own in the arena it prints nothing
// and runHelper returns that mapping's maps line as busy.
func runHelper(ctx context.Context, bin string, input []byte, stdout io.Writer) (busy string, err error) {
	cmd := exec.CommandContext(ctx, bin)
	cmd.Stdin = bytes.NewReader(input)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	pgid := cmd.Process.Pid
	werr := copyOutput(ctx, out, stdout)
	_ = killGroup(pgid) // nothing is left in a finished run; this is for the others
	err = cmd.Wait()
	reapGroup(pgid)
	msg := strings.TrimSpace(stderr.String())
	switch {
	case ctx.Err() != nil:
		return "", ctx.Err()
	case werr != nil:
		return "", werr
	case cmd.ProcessState.ExitCode() == 7:
		return strings.TrimPrefix(msg, "replay helper: the arena already holds the helper's own "), nil
	case err != nil:
		if msg == "" {
			msg = "no message"
		}
		return "", fmt.Errorf("live replay helper: %v: %s", err, msg)
	}
	return "", nil
}

// copyOutput copies the helper's lines to w, naming errnos, until the helper
// closes its output, ctx is cancelled or w fails.
func copyOutput(ctx context.Context, r io.Reader, w io.Writer) error {
	br := bufio.NewReaderSize(r, 64*1024)
	for ctx.Err() == nil {
		line, err := br.ReadString('\n')
		if line != "" {
			if _, werr := io.WriteString(w, nameErrno(line)); werr != nil {
				return werr
			}
		}
		if err != nil {
			return nil
		}
	}
	return nil
}

// nameErrno turns the helper's "error LINE ERRNO\n" into "error LINE NAME\n".
func nameErrno(line string) string {
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "error" {
		return line
	}
	n, err := strconv.Atoi(f[2])
	if err != nil {
		return line
	}
	l, _ := strconv.Atoi(f[1])
	name := unix.ErrnoName(syscall.Errno(n))
	if name == "" {
		name = "errno" + f[2]
	}
	return trace.ErrorLine(l, name) + "\n"
}

func killGroup(pgid int) error {
	err := syscall.Kill(-pgid, syscall.SIGKILL)
	if err == syscall.ESRCH {
		return nil
	}
	return err
}

// reapGroup waits for every process left in the group; with the subreaper
// bit, the helper's orphaned children are ours to reap.
func reapGroup(pgid int) {
	for {
		var st unix.WaitStatus
		_, err := unix.Wait4(-pgid, &st, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil { // ECHILD: none left
			return
		}
	}
}
