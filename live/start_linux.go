package live

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// The environment by which a helper learns its parent: the pid that
// started it and the descriptor of its end of the parent's pipe.
const (
	parentPIDEnv = "MMLAB_PARENT_PID"
	parentFDEnv  = "MMLAB_PARENT_FD"
)

// Start starts cmd (from Command) so that it dies with this process, in
// three ways, since each misses a case: PR_SET_PDEATHSIG (SIGKILL when the
// thread that forked it exits: Start forks from one OS thread locked for
// the life of the process); the helper's re-check of getppid() after it
// runs, for a parent that died before the signal was armed; and a pipe
// from this process whose EOF (the kernel closes this end when the process
// dies, however it dies) the helper takes as the order to exit, which also
// holds where the kernel clears the signal (a helper whose credentials
// change: commit_creds()).
// Set cmd's files and other attributes before.
func Start(cmd *exec.Cmd) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd.ExtraFiles = append(cmd.ExtraFiles, r)
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(slices.Clone(env), parentPIDEnv+"="+strconv.Itoa(os.Getpid()),
		parentFDEnv+"="+strconv.Itoa(2+len(cmd.ExtraFiles)))
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	starter.Do(func() { go startThread() })
	done := make(chan error)
	starts <- startReq{cmd, done}
	if err := <-done; err != nil {
		w.Close()
		return err
	}
	parentEnds.Lock()
	parentEnds.files = append(parentEnds.files, w)
	parentEnds.Unlock()
	return nil
}

// parentEnds holds this process's end of every helper's pipe: they close
// when it exits.
var parentEnds struct {
	sync.Mutex
	files []*os.File
}

type startReq struct {
	cmd  *exec.Cmd
	done chan<- error
}

var (
	starter sync.Once
	starts  = make(chan startReq)
)

// startThread starts every helper from one OS thread that it never
// unlocks, so that thread lives as long as the process.
func startThread() {
	runtime.LockOSThread()
	for r := range starts {
		r.done <- r.cmd.Start()
	}
}

// watchParent, in a helper that Start started, exits if its parent is
// already gone and otherwise exits when the parent's pipe reaches EOF.
func watchParent() {
	fd, err := strconv.Atoi(os.Getenv(parentFDEnv))
	if err != nil {
		return
	}
	ppid := os.Getenv(parentPIDEnv)
	os.Unsetenv(parentFDEnv)
	os.Unsetenv(parentPIDEnv)
	pipe := os.NewFile(uintptr(fd), "parent")
	syscall.CloseOnExec(fd)
	if strconv.Itoa(os.Getppid()) != ppid {
		os.Exit(1) // the parent died before PR_SET_PDEATHSIG was armed
	}
	go func() {
		io.Copy(io.Discard, pipe)
		os.Exit(1)
	}()
}

// StartPiped starts cmd (from Command) with Start, talking to the caller
// line by line: its stdin and stdout piped to the caller, its stderr this
// process's.
func StartPiped(cmd *exec.Cmd) (io.WriteCloser, *bufio.Reader, error) {
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := Start(cmd); err != nil {
		return nil, nil, err
	}
	return in, bufio.NewReader(out), nil
}

// A Helper is a process of a run started by StartHelper, talking to it
// line by line.
type Helper struct {
	Cmd *exec.Cmd
	In  io.WriteCloser // its stdin
	Out *bufio.Reader  // its stdout
}

// StartHelper starts cmd (from Command) as StartPiped does.
func StartHelper(cmd *exec.Cmd) (*Helper, error) {
	in, out, err := StartPiped(cmd)
	if err != nil {
		return nil, err
	}
	return &Helper{Cmd: cmd, In: in, Out: out}, nil
}

// Expect reads one line, which must start with word; it returns the rest.
func (h *Helper) Expect(word string) (string, error) {
	line, err := h.Out.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("no answer (%w)", err)
	}
	line = strings.TrimSuffix(line, "\n")
	rest, ok := strings.CutPrefix(line, word)
	if !ok {
		return "", fmt.Errorf("%q", line)
	}
	return strings.TrimSpace(rest), nil
}

// ExpectContext is Expect until ctx is done, when it returns ctx.Err()
// itself, not wrapped, which the caller can tell from the helper's errors:
// the read goes on until the helper answers or its stdout closes, so the
// caller then kills the helper.
func (h *Helper) ExpectContext(ctx context.Context, word string) (string, error) {
	type answer struct {
		line string
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		line, err := h.Expect(word)
		done <- answer{line, err}
	}()
	select {
	case a := <-done:
		return a.line, a.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Kill closes the helper's stdin, kills it and waits for it.
func (h *Helper) Kill() {
	h.In.Close()
	h.Cmd.Process.Kill()
	h.Cmd.Wait()
}
