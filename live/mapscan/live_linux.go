package mapscan

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"mmlab/experiment"
	"mmlab/experiment/mapscan"
	"mmlab/live"
)

// helperProc is one helper process.
type helperProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startHelper(ctx context.Context, role string, env ...string) (*helperProc, error) {
	cmd, err := live.Command(ctx, role, append([]string{"GOGC=off", "GOMAXPROCS=2"}, env...)...)
	if err != nil {
		return nil, fmt.Errorf("mapscan: %w", err)
	}
	in, out, err := live.StartPiped(cmd)
	if err != nil {
		return nil, fmt.Errorf("mapscan: starting the %s: %w", role, err)
	}
	h := &helperProc{cmd: cmd, in: in, out: out}
	if _, err := h.expect("ready"); err != nil {
		h.kill()
		return nil, fmt.Errorf("mapscan: the %s did not start: %w", role, err)
	}
	return h, nil
}

// expect reads one line, which must start with word; it returns the rest.
func (h *helperProc) expect(word string) (string, error) {
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

func (h *helperProc) kill() {
	h.in.Close()
	h.cmd.Process.Kill()
	h.cmd.Wait()
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
			h.kill()
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
		for range mapscan.NumScanners {
			s, err := startHelper(ctx, roleScanner, pidEnv+"="+strconv.Itoa(mapper.cmd.Process.Pid), kindEnv+"="+o.Scanners)
			if err != nil {
				return mapscan.Stats{}, err
			}
			helpers = append(helpers, s)
			scanners = append(scanners, s)
		}
		for range mapscan.NumScanners {
			busy, err := startHelper(ctx, roleBusy, busyEnv+"="+strconv.FormatInt(o.BusyDuration.Nanoseconds(), 10))
			if err != nil {
				return mapscan.Stats{}, err
			}
			helpers = append(helpers, busy)
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
