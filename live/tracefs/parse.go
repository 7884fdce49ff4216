package tracefs

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Event is one entry of an instance's trace file, in the default output
// options (context-info on, record-tgid off): a line "COMM-TID [CPU] FLAGS
// SECONDS.MICROS: NAME: ARGS", or for a kernel stack (an event's
// stacktrace trigger) "...: <stack trace>" and one line " => FUNCTION"
// per frame, innermost first.
type Event struct {
	Comm string
	TID  int // the task's pid, the thread id
	CPU  int // the CPU it ran on
	// Flags is the irq-info field ("d.h1."): irqs-off, need-resched
	// (trace_output.c:trace_print_lat_fmt: N, n, B, b, L, l, p, or "."),
	// hardirq/softirq, preempt depth, migrate-disable.
	Flags  string
	TimeNS int64 // the trace clock's time, to the microsecond the text gives
	Name   string
	Args   string   // the event's print format applied to its fields
	Stack  []string // a StackTrace's frames
}

// StackTrace is the Name of a kernel stack entry.
const StackTrace = "<stack trace>"

// lineRE matches an event line; a comm may itself contain "-" and spaces,
// so the tid is the digits after the last "-" before the CPU field.
var lineRE = regexp.MustCompile(`^\s*(.*)-(\d+)\s+\[(\d+)\]\s+(\S+)\s+(\d+)\.(\d{6}): (\w+|<stack trace>):? ?(.*)$`)

// entriesRE matches the header line that counts the events the buffer
// holds and those written to it; fewer held than written means some were
// lost (overwritten or dropped).
var entriesRE = regexp.MustCompile(`^# entries-in-buffer/entries-written: (\d+)/(\d+)`)

// lostRE matches the line the kernel prints where a CPU's buffer lost
// events (print_trace_line's "CPU:%d [LOST %lu EVENTS]").
var lostRE = regexp.MustCompile(`^CPU:\d+ \[LOST (\d+) EVENTS\]`)

// Parse reads a trace file's text: its events, and how many were written
// to the buffer but lost before they were read (the header's count, or the
// LOST lines').
// A line that is neither a comment nor an event is an error.
func Parse(r io.Reader) (evs []Event, lost int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			if m := entriesRE.FindStringSubmatch(line); m != nil {
				held, _ := strconv.Atoi(m[1])
				written, _ := strconv.Atoi(m[2])
				lost = written - held
			}
			continue
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		if frame, ok := strings.CutPrefix(line, " => "); ok {
			if len(evs) == 0 || evs[len(evs)-1].Name != StackTrace {
				return evs, lost, fmt.Errorf("tracefs: a stack frame outside a stack: %q", line)
			}
			evs[len(evs)-1].Stack = append(evs[len(evs)-1].Stack, frame)
			continue
		}
		if m := lostRE.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			lost += n
			continue
		}
		m := lineRE.FindStringSubmatch(line)
		if m == nil {
			return evs, lost, fmt.Errorf("tracefs: not an event line: %q", line)
		}
		tid, _ := strconv.Atoi(m[2])
		cpu, _ := strconv.Atoi(m[3])
		sec, err1 := strconv.ParseInt(m[5], 10, 64)
		usec, err2 := strconv.ParseInt(m[6], 10, 64)
		if err1 != nil || err2 != nil {
			return evs, lost, fmt.Errorf("tracefs: bad timestamp in %q", line)
		}
		evs = append(evs, Event{Comm: m[1], TID: tid, CPU: cpu, Flags: m[4], TimeNS: sec*1e9 + usec*1e3, Name: m[7], Args: m[8]})
	}
	return evs, lost, sc.Err()
}
