package mapscan

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"mmlab/experiment/mapscan"
)

// helper is one helper process.
type helper struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startHelper(role string, env ...string) (*helper, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("mapscan: finding this binary to start the %s: %w", role, err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), append([]string{roleEnv + "=" + role, "GOGC=off", "GOMAXPROCS=2"}, env...)...)
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
		return nil, fmt.Errorf("mapscan: starting the %s: %w", role, err)
	}
	h := &helper{cmd: cmd, in: in, out: bufio.NewReader(out)}
	if _, err := h.expect("ready"); err != nil {
		h.kill()
		return nil, fmt.Errorf("mapscan: the %s did not start: %w", role, err)
	}
	return h, nil
}

// expect reads one line, which must start with word; it returns the rest.
func (h *helper) expect(word string) (string, error) {
	line, err := h.out.ReadString('\n')
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

func (h *helper) kill() {
	h.in.Close()
	h.cmd.Process.Kill()
	h.cmd.Wait()
}

// Run runs one live run: the mapper for o.Duration with o.Scanners
// scanners. Every helper is gone when it returns, on error or cancellation
// too.
func Run(ctx context.Context, o mapscan.Options) (mapscan.Stats, error) {
	switch o.Scanners {
	case "none", "text", "query":
	default:
		return mapscan.Stats{}, fmt.Errorf("mapscan: scanners %q: want none, text or query", o.Scanners)
	}
	var helpers []*helper
	defer func() {
		for _, h := range helpers {
			h.kill()
		}
	}()
	mapper, err := startHelper("mapper")
	if err != nil {
		return mapscan.Stats{}, err
	}
	helpers = append(helpers, mapper)
	var scanners []*helper
	if o.Scanners != "none" {
		busy, err := startHelper("busy")
		if err != nil {
			return mapscan.Stats{}, err
		}
		helpers = append(helpers, busy)
		for range mapscan.NumScanners {
			s, err := startHelper("scanner", "MMLAB_MAPSCAN_PID="+strconv.Itoa(mapper.cmd.Process.Pid), "MMLAB_MAPSCAN_KIND="+o.Scanners)
			if err != nil {
				return mapscan.Stats{}, err
			}
			helpers = append(helpers, s)
			scanners = append(scanners, s)
		}
	}
	if _, err := fmt.Fprintf(mapper.in, "go %d %d\n", o.Duration.Nanoseconds(), o.Seed); err != nil {
		return mapscan.Stats{}, fmt.Errorf("mapscan: mapper: %w", err)
	}
	type answer struct {
		line string
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		line, err := mapper.expect("stats")
		done <- answer{line, err}
	}()
	var a answer
	select {
	case a = <-done:
	case <-ctx.Done():
		return mapscan.Stats{}, ctx.Err() // the deferred kills end the helpers
	}
	if a.err != nil {
		return mapscan.Stats{}, fmt.Errorf("mapscan: mapper: %w", a.err)
	}
	var st mapscan.Stats
	if err := json.Unmarshal([]byte(a.line), &st); err != nil {
		return st, fmt.Errorf("mapscan: mapper's stats: %w", err)
	}
	for _, s := range scanners {
		s.cmd.Process.Signal(syscall.SIGTERM)
		rest, err := s.expect("passes")
		if err != nil {
			return st, fmt.Errorf("mapscan: scanner: %w", err)
		}
		n, _ := strconv.Atoi(rest)
		st.ScanPasses += n
	}
	return st, nil
}
