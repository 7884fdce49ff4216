package maptear

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"mmlab/experiment"
	"mmlab/experiment/maptear"
	"mmlab/explore"
	"mmlab/host"
	"mmlab/live"
	"mmlab/live/procmaps"
	"mmlab/uapi"
)

// hooks are the package's test hooks, set only from export_linux_test.go.
var hooks struct {
	// dropNext: while the child runs free, report the second line of the
	// second chunk as its first, as a reader that skips a VMA would.
	dropNext bool
	// afterRead is called after each query while the child runs free.
	afterRead func()
}

// Run runs the tearing check of each case of o against the running kernel
// and emits what each saw. It starts one child process, which is gone when
// Run returns. An error means the check could not run; what it found is in
// the results (see maptear.Result.Failed).
func Run(ctx context.Context, o *maptear.Options, env experiment.Env, emit func(maptear.Result)) error {
	pin := o.Pin && runtime.NumCPU() >= 2
	if pin {
		unpin, err := pinThread(0)
		if err != nil {
			return err
		}
		defer unpin()
	}
	s, err := startChild(ctx, pin, o.File)
	if err != nil {
		return err
	}
	defer s.close()
	return maptear.Check(ctx, s, o, experiment.LiveRow, env.Progress, emit)
}

// pinThread locks the calling goroutine to its thread and the thread to
// cpu; the returned func restores the thread's CPUs and unlocks it.
func pinThread(cpu int) (func(), error) {
	runtime.LockOSThread()
	old, err := host.CPUs()
	if err == nil {
		err = host.Pin(cpu)
	}
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("maptear: pinning the reader: %w", err)
	}
	return func() {
		_ = host.Pin(old...)
		runtime.UnlockOSThread()
	}, nil
}

// childSpace is the child process as a maptear.Space: its maps read the way
// proc-maps-race.c does (one page-sized read() per chunk, skipping the
// chunks before the one that holds the first piece), its PROCMAP_QUERY,
// and its modifier driven by one command per line (see childMain).
type childSpace struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	pieces maptear.Span
	page   uint64

	fd      int
	path    string
	maps    *procmaps.Reader // for PROCMAP_QUERY
	smaps   bool             // reading smaps, not maps
	buf     []byte
	before  []byte // the end of the first chunk of the last observation
	skip    int    // chunks before the boundary's
	running bool   // between Start and Stop
	text    []byte // ReadText's
}

func startChild(ctx context.Context, pin bool, file string) (*childSpace, error) {
	// No garbage collection and one P: the child's runtime stays quiet and
	// maps nothing while it runs.
	env := []string{"GOGC=off", "GOMAXPROCS=1"}
	if pin {
		env = append(env, childCPUEnv+"=1")
	}
	// Not killed when ctx is cancelled: the check stops between two reads
	// and close ends the child, so the last read is whole.
	cmd, err := live.Command(context.WithoutCancel(ctx), childRole, env...)
	if err != nil {
		return nil, fmt.Errorf("maptear: %w", err)
	}
	in, out, err := live.StartPiped(cmd)
	if err != nil {
		return nil, fmt.Errorf("maptear: starting the child: %w", err)
	}
	s := &childSpace{cmd: cmd, in: in, out: out, fd: -1, smaps: file == "smaps",
		page: uint64(os.Getpagesize()), buf: make([]byte, os.Getpagesize())}
	line, err := s.out.ReadString('\n')
	var base, n, pages uint64
	if _, serr := fmt.Sscanf(line, "ready %v %d %d\n", &base, &n, &pages); err != nil || serr != nil || n != maptear.NPieces || pages != maptear.PiecePages {
		s.close()
		return nil, fmt.Errorf("maptear: the child did not start: %q", strings.TrimSpace(line))
	}
	s.pieces = maptear.Span{Start: base, End: base + n*pages*s.page}
	if err := s.open(file); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// open opens the child's file and finds the chunk holding the first piece.
func (s *childSpace) open(file string) error {
	pid := s.cmd.Process.Pid
	s.path = "/proc/" + strconv.Itoa(pid) + "/" + file
	fd, err := unix.Open(s.path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("maptear: open %s: %s", s.path, unix.ErrnoName(err.(unix.Errno)))
	}
	s.fd = fd
	if s.maps, err = procmaps.Open(pid); err != nil {
		return err
	}
	for k := 0; ; k++ {
		chunk, err := s.readChunk()
		if err != nil {
			return fmt.Errorf("maptear: looking for the pieces in %s: %w", s.path, err)
		}
		for line := range bytes.Lines(chunk) {
			var v uapi.VMA
			if uapi.ParseLine(bytes.TrimSuffix(line, []byte("\n")), &v) == nil && v.Start >= s.pieces.Start && v.Start < s.pieces.End {
				s.skip = k
				return nil
			}
		}
	}
}

// close ends the child (EOF on its stdin, then SIGKILL in case it is stuck)
// and closes the files.
func (s *childSpace) close() {
	s.in.Close()
	s.cmd.Process.Kill()
	s.cmd.Wait()
	if s.fd >= 0 {
		unix.Close(s.fd)
	}
	if s.maps != nil {
		s.maps.Close()
	}
}

// do sends one command and waits for its answer.
func (s *childSpace) do(cmd string) error {
	if _, err := io.WriteString(s.in, cmd+"\n"); err != nil {
		return fmt.Errorf("child: %w", err)
	}
	line, err := s.out.ReadString('\n')
	if err != nil {
		return fmt.Errorf("child: %s: no answer: %w", cmd, err)
	}
	if line != "ok\n" {
		return fmt.Errorf("child: %s: %s", cmd, strings.TrimSpace(line))
	}
	return nil
}

func (s *childSpace) Pieces() (maptear.Span, uint64) { return s.pieces, s.page }

func (s *childSpace) Begin(c maptear.Mod) error {
	return s.do(fmt.Sprintf("case %s %#x %#x %d", c.Case, c.Addr, c.Next, c.Prot))
}

func (s *childSpace) Modify() error  { return s.do("m") }
func (s *childSpace) Restore() error { return s.do("r") }

// Start lets the child run free; it answers "g" only when stopped.
func (s *childSpace) Start() error {
	if _, err := io.WriteString(s.in, "g\n"); err != nil {
		return fmt.Errorf("child: %w", err)
	}
	s.running = true
	return nil
}

// Stop sends "s", which stops the child, and waits for its answer to "g".
func (s *childSpace) Stop() error {
	s.running = false
	return s.do("s")
}

// read is one read() of the maps file into s.buf, retried on EINTR.
func (s *childSpace) read() (int, error) {
	for {
		n, err := unix.Read(s.fd, s.buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("read: %s", unix.ErrnoName(err.(unix.Errno)))
		}
		return n, nil
	}
}

// readChunk reads once: whole lines, at most a page.
func (s *childSpace) readChunk() ([]byte, error) {
	n, err := s.read()
	switch {
	case err != nil:
		return nil, err
	case n == 0:
		return nil, errors.New("read: end of file")
	case s.buf[n-1] != '\n':
		return nil, fmt.Errorf("read: %d bytes not ending in a newline", n)
	}
	return s.buf[:n], nil
}

// Observe reads the boundary: the last line of chunk skip and the first
// line of chunk skip+1, each chunk from its own read().
func (s *childSpace) Observe() (maptear.Boundary, error) {
	var b maptear.Boundary
	if _, err := unix.Seek(s.fd, 0, 0); err != nil {
		return b, fmt.Errorf("lseek: %w", err)
	}
	for range s.skip {
		if _, err := s.readChunk(); err != nil {
			return b, err
		}
	}
	chunk, err := s.readChunk()
	if err != nil {
		return b, err
	}
	var ok bool
	if b.Last, ok = s.header(chunk, -1); !ok {
		return b, fmt.Errorf("no VMA line at the end of chunk %d: %q", s.skip, lastLine(chunk))
	}
	s.before = append(s.before[:0], maptear.LastLines(chunk, maptear.BoundaryLines)...)
	b.Before = s.before
	if chunk, err = s.readChunk(); err != nil {
		return b, err
	}
	n := 0
	if hooks.dropNext && s.running {
		n = 1
	}
	if b.First, ok = s.header(chunk, n); !ok {
		return b, fmt.Errorf("no VMA line %d in chunk %d: %q", n, s.skip+1, chunk)
	}
	b.After = maptear.FirstLines(chunk, maptear.BoundaryLines)
	return b, nil
}

// header finds the VMA line number n of chunk (-1: the last). In maps every
// line is one and must parse; in smaps a VMA's record is its header line
// followed by lines of counters, and only the headers parse.
func (s *childSpace) header(chunk []byte, n int) (maptear.Span, bool) {
	var v uapi.VMA
	if !s.smaps {
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
			return maptear.Span{}, false
		}
		err := uapi.ParseLine(line, &v)
		return maptear.SpanOf(&v), err == nil
	}
	var last maptear.Span
	found := false
	for line := range bytes.Lines(chunk) {
		if uapi.ParseLine(line[:len(line)-1], &v) != nil {
			continue
		}
		if n == 0 {
			return maptear.SpanOf(&v), true
		}
		n--
		last, found = maptear.SpanOf(&v), true
	}
	return last, n < 0 && found
}

// lastLine returns the last line of chunk, without its newline.
func lastLine(chunk []byte) []byte {
	chunk = chunk[:len(chunk)-1]
	return chunk[bytes.LastIndexByte(chunk, '\n')+1:]
}

// Query asks PROCMAP_QUERY for the VMA covering addr; found is false on
// ENOENT.
func (s *childSpace) Query(addr uint64) (v maptear.Span, found bool, err error) {
	if s.running && hooks.afterRead != nil {
		defer hooks.afterRead()
	}
	vma, err := s.maps.Lookup(addr)
	if errors.Is(err, unix.ENOENT) {
		return v, false, nil
	}
	if err != nil {
		return v, false, err
	}
	return maptear.SpanOf(vma), true, nil
}

// BeginGap has the child map gap layout l at maptear.GapBase.
func (s *childSpace) BeginGap(l *explore.GapLayout) (explore.GapPlan, error) {
	return l.Place(maptear.GapBase, s.page), s.do("gap " + l.Name)
}

// EndGap has the child unmap the gap layout.
func (s *childSpace) EndGap() error { return s.do("ungap") }

// ReadText reads the child's whole maps text, one read() per chunk.
func (s *childSpace) ReadText() ([]byte, error) {
	if _, err := unix.Seek(s.fd, 0, 0); err != nil {
		return nil, fmt.Errorf("lseek: %w", err)
	}
	s.text = s.text[:0]
	for {
		n, err := s.read()
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return s.text, nil
		}
		s.text = append(s.text, s.buf[:n]...)
	}
}
