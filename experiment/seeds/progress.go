package seeds

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Progress shows where `mmlab all` is. On a terminal it keeps one status
// line (seed, experiment, the experiment's last progress message, elapsed
// and estimated time left); elsewhere it prints plain lines. Lines of the
// experiments that are not progress (errors, skipped parts) are printed in
// full either way.
type Progress struct {
	w        io.Writer
	quiet    bool
	terminal bool
	start    time.Time
	left     time.Duration // estimated time of the steps not yet begun
	seed     string
	step     PlannedStep
	stepAt   time.Time
	partial  []byte
}

// NewProgress writes to w, nothing when quiet; total is the run's
// estimated time.
func NewProgress(w *os.File, quiet bool, total time.Duration) *Progress {
	fi, err := w.Stat()
	return &Progress{w: w, quiet: quiet, terminal: err == nil && fi.Mode()&os.ModeCharDevice != 0, start: time.Now(), left: total}
}

// Begin says that step st of seed begins.
func (p *Progress) Begin(seed string, st PlannedStep) {
	p.seed, p.step, p.stepAt = seed, st, time.Now()
	p.left -= st.Est
	p.status("started")
}

// End clears the status line.
func (p *Progress) End() {
	if p.terminal && !p.quiet {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

func (p *Progress) status(msg string) {
	if p.quiet {
		return
	}
	left := p.left + max(0, p.step.Est-time.Since(p.stepAt))
	line := fmt.Sprintf("[seed %s · %s · %s elapsed · ~%s left] %s", p.seed, p.step.Label(),
		time.Since(p.start).Round(time.Second), left.Round(time.Second), msg)
	if p.terminal {
		if len(line) > 160 {
			line = line[:160]
		}
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		return
	}
	fmt.Fprintln(p.w, line)
}

// Write takes the experiments' stderr: progress lines ("NAME TARGET: ...")
// become the status, anything else is printed whole.
func (p *Progress) Write(b []byte) (int, error) {
	p.partial = append(p.partial, b...)
	for {
		i := strings.IndexByte(string(p.partial), '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(p.partial[:i])
		p.partial = p.partial[i+1:]
		if strings.HasPrefix(line, p.step.Experiment+" ") {
			p.status(strings.TrimPrefix(line, p.step.Experiment+" "))
			continue
		}
		p.End()
		fmt.Fprintln(p.w, line)
	}
}
