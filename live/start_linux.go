package live

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"syscall"
)

// StartPiped starts cmd (from Command) talking to the caller line by line:
// its stdin and stdout piped to the caller, its stderr this process's, and
// killed with SIGKILL if this process dies (PR_SET_PDEATHSIG).
func StartPiped(cmd *exec.Cmd) (io.WriteCloser, *bufio.Reader, error) {
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	return in, bufio.NewReader(out), nil
}
