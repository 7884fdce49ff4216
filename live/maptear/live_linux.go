package maptear

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mmlab/uapi"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"mmlab/live/procmaps"
)

// RunLive runs the tearing check of each case of opts against the running
// kernel and returns what each saw. It starts one child process (this
// binary again, in its modifier mode), which is gone when RunLive returns.
// An error means the check could not run; what it found is in the results
// (see CaseResult.Failed).
func RunLive(ctx context.Context, opts Options) ([]CaseResult, error) {
	if err := opts.Prepare(); err != nil {
		return nil, err
	}
	pin := opts.Pin && runtime.NumCPU() >= 2
	if pin {
		unpin, err := pinThread(0)
		if err != nil {
			return nil, err
		}
		defer unpin()
	}
	ch, err := startChild(pin)
	if err != nil {
		return nil, err
	}
	defer ch.stop()
	rd, err := newBoundaryReader(ch, opts.File)
	if err != nil {
		return nil, err
	}
	defer rd.close()

	return opts.RunCases(ctx, func(name string) (CaseResult, error) { return rd.runCase(ctx, name, opts) })
}

// child is the modifier process.
type child struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	base uint64 // first address of the pieces
	size uint64
}

// pinThread locks the calling goroutine to its thread and the thread to
// cpu; the returned func restores the thread's CPUs and unlocks it.
func pinThread(cpu int) (func(), error) {
	runtime.LockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("maptear: sched_getaffinity: %w", err)
	}
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("maptear: pinning the reader to CPU %d: sched_setaffinity: %w", cpu, err)
	}
	return func() {
		unix.SchedSetaffinity(0, &old)
		runtime.UnlockOSThread()
	}, nil
}

func startChild(pin bool) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("maptear: finding this binary to start the child: %w", err)
	}
	cmd := exec.Command(exe)
	// No garbage collection and one P: the child's runtime stays quiet and
	// maps nothing while it runs.
	cmd.Env = append(os.Environ(), childEnv+"=1", "GOGC=off", "GOMAXPROCS=1")
	if pin {
		cmd.Env = append(cmd.Env, childCPUEnv+"=1")
	}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("maptear: starting the child: %w", err)
	}
	c := &child{cmd: cmd, in: in, out: bufio.NewReader(out)}
	line, err := c.out.ReadString('\n')
	var n, pages uint64
	if _, serr := fmt.Sscanf(line, "ready %v %d %d\n", &c.base, &n, &pages); err != nil || serr != nil {
		c.stop()
		return nil, fmt.Errorf("maptear: the child did not start: %q", strings.TrimSpace(line))
	}
	c.size = n * pages * uint64(os.Getpagesize())
	return c, nil
}

// do sends one command and waits for its answer.
func (c *child) do(cmd string) error {
	if _, err := io.WriteString(c.in, cmd+"\n"); err != nil {
		return fmt.Errorf("child: %w", err)
	}
	line, err := c.out.ReadString('\n')
	if err != nil {
		return fmt.Errorf("child: %s: no answer: %w", cmd, err)
	}
	if line != "ok\n" {
		return fmt.Errorf("child: %s: %s", cmd, strings.TrimSpace(line))
	}
	return nil
}

// stop ends the child: EOF on its stdin, then SIGKILL in case it is stuck.
func (c *child) stop() {
	c.in.Close()
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

// boundaryReader reads the child's maps the way proc-maps-race.c does: one
// page-sized read() per chunk, skipping the chunks before the one that
// holds the first piece, and returns the last line of that chunk and the
// first line of the next.
type boundaryReader struct {
	ch    *child
	fd    int
	maps  *procmaps.Reader // for PROCMAP_QUERY
	smaps bool             // reading smaps, not maps
	buf   []byte
	skip  int
}

func newBoundaryReader(ch *child, file string) (*boundaryReader, error) {
	pid := ch.cmd.Process.Pid
	path := "/proc/" + strconv.Itoa(pid) + "/" + file
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("maptear: open %s: %s", path, unix.ErrnoName(err.(unix.Errno)))
	}
	maps, err := procmaps.Open(pid)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	b := &boundaryReader{ch: ch, fd: fd, maps: maps, smaps: file == "smaps", buf: make([]byte, os.Getpagesize())}
	// Find the chunk holding the first piece.
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		b.close()
		return nil, err
	}
	for k := 0; ; k++ {
		chunk, err := b.readChunk()
		if err != nil {
			b.close()
			return nil, fmt.Errorf("maptear: looking for the pieces in %s: %w", path, err)
		}
		for line := range bytes.Lines(chunk) {
			var v uapi.VMA
			if uapi.ParseLine(bytes.TrimSuffix(line, []byte("\n")), &v) == nil && v.Start >= ch.base && v.Start < ch.base+ch.size {
				b.skip = k
				return b, nil
			}
		}
	}
}

func (b *boundaryReader) close() {
	unix.Close(b.fd)
	b.maps.Close()
}

// readChunk reads once: whole lines, at most a page.
func (b *boundaryReader) readChunk() ([]byte, error) {
	for {
		n, err := unix.Read(b.fd, b.buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read: %s", unix.ErrnoName(err.(unix.Errno)))
		}
		if n == 0 {
			return nil, errors.New("read: end of file")
		}
		if b.buf[n-1] != '\n' {
			return nil, fmt.Errorf("read: %d bytes not ending in a newline", n)
		}
		return b.buf[:n], nil
	}
}

// observe reads the boundary: the last line of chunk skip and the first
// line of chunk skip+1, each chunk from its own read().
func (b *boundaryReader) observe() (last, first Span, err error) {
	return b.observeDropping(false)
}

// observeDropping is observe; with dropNext it takes the second line of the
// second chunk instead of the first (the test hook of Options).
func (b *boundaryReader) observeDropping(dropNext bool) (last, first Span, err error) {
	if _, err := unix.Seek(b.fd, 0, 0); err != nil {
		return last, first, fmt.Errorf("lseek: %w", err)
	}
	for range b.skip {
		if _, err := b.readChunk(); err != nil {
			return last, first, err
		}
	}
	chunk, err := b.readChunk()
	if err != nil {
		return last, first, err
	}
	last, ok := b.header(chunk, -1)
	if !ok {
		return last, first, fmt.Errorf("no VMA line at the end of chunk %d: %q", b.skip, lastLine(chunk))
	}
	if chunk, err = b.readChunk(); err != nil {
		return last, first, err
	}
	n := 0
	if dropNext {
		n = 1
	}
	if first, ok = b.header(chunk, n); !ok {
		return last, first, fmt.Errorf("no VMA line %d in chunk %d: %q", n, b.skip+1, chunk)
	}
	return last, first, nil
}

// header finds the VMA line number n of chunk (-1: the last). In maps every
// line is one and must parse; in smaps a VMA's record is its header line
// followed by lines of counters, and only the headers parse.
func (b *boundaryReader) header(chunk []byte, n int) (Span, bool) {
	var v uapi.VMA
	if !b.smaps {
		line := lastLine(chunk)
		for l := range bytes.Lines(chunk) {
			if n < 0 {
				break
			}
			if n == 0 {
				line = l[:len(l)-1]
				break
			}
			n--
		}
		if n > 0 {
			return Span{}, false
		}
		err := uapi.ParseLine(line, &v)
		return SpanOf(&v), err == nil
	}
	var last Span
	found := false
	for line := range bytes.Lines(chunk) {
		if uapi.ParseLine(line[:len(line)-1], &v) != nil {
			continue
		}
		if n == 0 {
			return SpanOf(&v), true
		}
		n--
		last, found = SpanOf(&v), true
	}
	return last, n < 0 && found
}

// lastLine returns the last line of chunk, without its newline.
func lastLine(chunk []byte) []byte {
	chunk = chunk[:len(chunk)-1]
	return chunk[bytes.LastIndexByte(chunk, '\n')+1:]
}

// query asks PROCMAP_QUERY for the VMA covering addr; found is false on ENOENT.
func (b *boundaryReader) query(addr uint64) (v Span, found bool, err error) {
	vma, err := b.maps.Lookup(addr)
	if errors.Is(err, unix.ENOENT) {
		return v, false, nil
	}
	if err != nil {
		return v, false, err
	}
	return SpanOf(vma), true, nil
}

func unixProt(p uapi.Perm) int {
	prot := unix.PROT_NONE
	if p&uapi.PROCMAP_QUERY_VMA_READABLE != 0 {
		prot |= unix.PROT_READ
	}
	if p&uapi.PROCMAP_QUERY_VMA_WRITABLE != 0 {
		prot |= unix.PROT_WRITE
	}
	if p&uapi.PROCMAP_QUERY_VMA_EXECUTABLE != 0 {
		prot |= unix.PROT_EXEC
	}
	return prot
}

// runCase calibrates one case with the child stopped (original, modified,
// restored boundary), then lets the child modify and restore freely while
// it observes.
func (b *boundaryReader) runCase(ctx context.Context, name string, opts Options) (CaseResult, error) {
	res := CaseResult{Case: name, File: opts.File}
	page := uint64(os.Getpagesize())
	last0, first0, err := b.observe()
	if err != nil {
		return res, err
	}
	inPieces := func(s Span) bool { return s.Start >= b.ch.base && s.End <= b.ch.base+b.ch.size }
	if !inPieces(last0) || !inPieces(first0) || last0.End-last0.Start != piecePages*page || first0.Start != last0.End {
		return res, fmt.Errorf("the chunk boundary is not between two pieces: %+v | %+v", last0, first0)
	}
	addr := last0.Start
	qaddr := addr + page // split, remap: the middle page changes hands
	var hole Span
	if name == "resize" {
		qaddr = addr
		hole = Span{Start: addr + page, End: addr + piecePages*page}
	}
	if err := b.ch.do(fmt.Sprintf("case %s %#x %#x %d", name, addr, first0.Start, unixProt(last0.Perm))); err != nil {
		return res, err
	}
	q0, ok0, err := b.query(qaddr)
	if err != nil {
		return res, err
	}
	if err := b.ch.do("m"); err != nil {
		return res, err
	}
	lastM, firstM, err := b.observe()
	if err != nil {
		return res, err
	}
	qM, okM, err := b.query(qaddr)
	if err != nil {
		return res, err
	}
	if err := b.ch.do("r"); err != nil {
		return res, err
	}
	lastR, firstR, err := b.observe()
	if err != nil {
		return res, err
	}
	if lastR != last0 || firstR != first0 {
		return res, fmt.Errorf("restoring did not bring back the boundary: %+v | %+v, was %+v | %+v", lastR, firstR, last0, first0)
	}
	if lastM == last0 || !ok0 || !okM {
		return res, fmt.Errorf("the modification did not show at the boundary (%+v | %+v) or the query found nothing", lastM, firstM)
	}
	c := Checker{
		LastRestored: last0, LastModified: lastM,
		FirstRestored: first0, FirstModified: firstM,
		QueryRestored: q0, QueryModified: qM,
		Mapped: Span{Start: last0.Start, End: first0.End},
		Hole:   hole,
	}

	// The child runs free; this side reads until done.
	if _, err := io.WriteString(b.ch.in, "g\n"); err != nil {
		return res, err
	}
	deadline := time.Now().Add(opts.Duration)
	var runErr error
	for opts.Reads == 0 || res.Reads < opts.Reads {
		if ctx.Err() != nil || (opts.Duration > 0 && time.Now().After(deadline)) {
			break
		}
		last, first, err := b.observeDropping(opts.dropNext)
		if err != nil {
			runErr = err
			break
		}
		c.Observe(&res, last, first)
		v, found, err := b.query(qaddr)
		if err != nil {
			runErr = err
			break
		}
		c.ObserveQuery(&res, v, found)
		if opts.afterRead != nil {
			opts.afterRead()
		}
	}
	// "s" stops the child; its answer to "g" comes then.
	if err := b.ch.do("s"); err != nil && runErr == nil {
		runErr = err
	}
	return res, runErr
}
