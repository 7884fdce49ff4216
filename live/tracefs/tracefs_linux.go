package tracefs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"mmlab/live"
)

// roots are the places tracefs is mounted, in the order tried.
var roots = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}

// prefix starts the name of every instance this package creates; the rest
// is "PID-N", the process and a counter.
const prefix = "mmlab-"

var instances atomic.Int64 // the N of the next instance name

// Instance is a private ftrace instance; Close removes it.
type Instance struct {
	dir string
}

// New creates an instance, stopped (tracing_on 0), with the trace clock
// clock ("mono": CLOCK_MONOTONIC, as clock_gettime gives it) and the
// default ring buffer. Without tracefs or the permission to create an
// instance the error wraps live.ErrNotSupported.
func New(clock string) (*Instance, error) {
	name := fmt.Sprintf("%s%d-%d", prefix, os.Getpid(), instances.Add(1))
	var tried []string
	for _, root := range roots {
		parent := filepath.Join(root, "instances")
		if _, err := os.Stat(parent); err != nil {
			tried = append(tried, parent+": "+errText(err))
			continue
		}
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			if errors.Is(err, fs.ErrPermission) {
				return nil, live.Unsupported("tracefs: creating %s: %s (needs root)", dir, errText(err))
			}
			return nil, fmt.Errorf("tracefs: creating %s: %w", dir, err)
		}
		in := &Instance{dir: dir}
		if err := in.setup(clock); err != nil {
			in.Close()
			return nil, err
		}
		return in, nil
	}
	return nil, live.Unsupported("tracefs: %s", strings.Join(tried, "; "))
}

func (in *Instance) setup(clock string) error {
	if err := in.write("tracing_on", "0"); err != nil {
		return err
	}
	return in.write("trace_clock", clock)
}

// errText is an error's errno text alone, without the path.
func errText(err error) string {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err.Error()
	}
	return err.Error()
}

// Dir is the instance's directory.
func (in *Instance) Dir() string { return in.dir }

func (in *Instance) write(file, s string) error {
	p := filepath.Join(in.dir, file)
	if err := os.WriteFile(p, []byte(s+"\n"), 0); err != nil {
		return fmt.Errorf("tracefs: writing %q to %s: %s", s, p, errText(err))
	}
	return nil
}

// SetEvent writes value to the file of event "system/name"
// ("lock/contention_begin", "filter", "flags & 6").
func (in *Instance) SetEvent(event, file, value string) error {
	return in.write(filepath.Join("events", event, file), value)
}

// Enable enables the events, each "system/name".
func (in *Instance) Enable(events ...string) error {
	for _, ev := range events {
		if err := in.SetEvent(ev, "enable", "1"); err != nil {
			return err
		}
	}
	return nil
}

// SetPIDs records only the events of the tasks with these thread ids
// (set_event_pid).
func (in *Instance) SetPIDs(tids ...int) error {
	s := make([]string, len(tids))
	for i, t := range tids {
		s[i] = strconv.Itoa(t)
	}
	return in.write("set_event_pid", strings.Join(s, " "))
}

// SetOption sets the trace option name (options/NAME) on or off
// ("event-fork": the children of set_event_pid's tasks are added to it
// when they fork).
func (in *Instance) SetOption(name string, on bool) error {
	v := "0"
	if on {
		v = "1"
	}
	return in.write(filepath.Join("options", name), v)
}

// Start and Stop switch recording on and off (tracing_on).
func (in *Instance) Start() error { return in.write("tracing_on", "1") }
func (in *Instance) Stop() error  { return in.write("tracing_on", "0") }

// Events reads and parses the instance's trace file (which it leaves in
// the buffer), with the number of events lost.
func (in *Instance) Events() ([]Event, int, error) {
	f, err := os.Open(filepath.Join(in.dir, "trace"))
	if err != nil {
		return nil, 0, fmt.Errorf("tracefs: %w", err)
	}
	defer f.Close()
	return Parse(f)
}

// Close stops recording and removes the instance; the kernel frees its
// buffer and disables its events.
func (in *Instance) Close() error {
	in.Stop()
	if err := os.Remove(in.dir); err != nil {
		return fmt.Errorf("tracefs: removing the instance: %w", err)
	}
	return nil
}

// Leftovers lists the instance directories of this process that exist
// under any root: none, once every Instance is closed.
func Leftovers() []string {
	var dirs []string
	for _, root := range roots {
		m, _ := filepath.Glob(filepath.Join(root, "instances", fmt.Sprintf("%s%d-*", prefix, os.Getpid())))
		dirs = append(dirs, m...)
	}
	return dirs
}
