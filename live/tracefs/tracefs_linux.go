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

	"golang.org/x/sys/unix"

	"mmlab/live"
)

// knownRoots are where tracefs may be mounted, in the order looked at:
// perf's tracefs__known_mountpoints (tools/lib/api/fs/fs.c) and the
// directory debugfs automounts it on.
var knownRoots = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing", "/tracing", "/trace"}

// Root returns where tracefs is mounted. Where it is mounted nowhere, Root
// mounts it at /sys/kernel/tracing and leaves it mounted, as perf's
// tracing_path_mount() -> fs__mount() does; where that is refused, the
// error wraps live.ErrNotSupported and says what to run.
func Root() (string, error) {
	if root := mounted(); root != "" {
		return root, nil
	}
	const root = "/sys/kernel/tracing"
	err := unix.Mount("nodev", root, "tracefs", 0, "")
	switch {
	case err == nil:
		return root, nil
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
		return "", live.Unsupported("tracefs is not mounted and mounting it needs CAP_SYS_ADMIN (%s): as root, run mount -t tracefs nodev %s", unix.ErrnoName(err.(unix.Errno)), root)
	case errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT):
		return "", live.Unsupported("tracefs: the kernel has none (CONFIG_TRACING): mount -t tracefs nodev %s: %s", root, unix.ErrnoName(err.(unix.Errno)))
	}
	return "", fmt.Errorf("tracefs: mount -t tracefs nodev %s: %w", root, err)
}

// mounted returns the first of knownRoots where tracefs is mounted, else
// the first tracefs mount point in /proc/self/mounts, else "".
func mounted() string {
	for _, root := range knownRoots {
		var st unix.Statfs_t
		if unix.Statfs(root, &st) == nil && st.Type == unix.TRACEFS_MAGIC {
			return root
		}
	}
	b, _ := os.ReadFile("/proc/self/mounts")
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) > 2 && f[2] == "tracefs" {
			return f[1]
		}
	}
	return ""
}

// prefix starts the name of every instance this package creates; the rest
// is live.RunName("-") and a counter, so that the next run can tell one a
// killed run left (sweepInstances).
const prefix = "mmlab-"

var instances atomic.Int64 // the N of the next instance name

func init() { live.RegisterSweeper(sweep) }

// Instance is a private ftrace instance; Close removes it.
type Instance struct {
	dir string
}

// New creates an instance, stopped (tracing_on 0), with the trace clock
// clock ("mono": CLOCK_MONOTONIC, as clock_gettime gives it) and the
// default ring buffer, mounting tracefs if it is not (Root). Without
// tracefs or the permission to create an instance the error wraps
// live.ErrNotSupported.
func New(clock string) (*Instance, error) {
	root, err := Root()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, "instances", fmt.Sprintf("%s%s-%d", prefix, live.RunName("-"), instances.Add(1)))
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return nil, live.Unsupported("tracefs: creating %s: %s (needs root)", dir, errText(err))
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, live.Unsupported("tracefs: creating %s: %s (the kernel has no ftrace instances)", dir, errText(err))
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

// SetBufferKB sets the ring buffer's size per CPU in KiB (buffer_size_kb),
// for a trace that must hold a whole run's events.
func (in *Instance) SetBufferKB(kb int) error { return in.write("buffer_size_kb", strconv.Itoa(kb)) }

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

// Leftovers lists the instance directories of this process: none, once
// every Instance is closed.
func Leftovers() []string {
	root := mounted()
	if root == "" {
		return nil
	}
	m, _ := filepath.Glob(filepath.Join(root, "instances", prefix+live.RunName("-")+"-*"))
	return m
}

// sweep removes the instances of runs that are no longer alive and the
// uprobe_events entries they left (UprobeGroup). It does not mount tracefs:
// where it is not mounted, no run has used it since.
func sweep() []string {
	root := mounted()
	if root == "" {
		return nil
	}
	var gone []string
	dirs, _ := filepath.Glob(filepath.Join(root, "instances", prefix+"*"))
	for _, dir := range dirs {
		if live.Dead(strings.TrimPrefix(filepath.Base(dir), prefix), "-") && os.Remove(dir) == nil {
			gone = append(gone, "tracefs instance "+filepath.Base(dir))
		}
	}
	return append(gone, sweepProbeEvents(root)...)
}

// appendLine writes line to file without truncating it: opening
// uprobe_events with O_TRUNC deletes every probe (probes_open).
func appendLine(file, line string) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	return errors.Join(err, f.Close())
}

// UprobeGroup is the group prefix of the uprobe_events entries this run
// creates: cilium/ebpf's legacy uprobe path (kernels without the uprobe
// PMU, before 4.17) writes "p:GROUP_RANDOM/NAME PATH:OFFSET" lines to the
// global uprobe_events, which outlive a killed process.
func UprobeGroup() string { return "mmlab_" + live.RunName("_") }

// sweepProbeEvents removes the uprobe_events entries of runs that are no
// longer alive, each by writing "-:GROUP/NAME" (trace_uprobe.c:
// create_or_delete_trace_uprobe).
func sweepProbeEvents(root string) []string {
	file := filepath.Join(root, "uprobe_events")
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	var gone []string
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		_, event, _ := strings.Cut(f[0], ":")
		group, _, _ := strings.Cut(event, "/")
		run, ok := strings.CutPrefix(group, "mmlab_")
		if !ok || !live.Dead(run, "_") {
			continue
		}
		if appendLine(file, "-:"+event) == nil {
			gone = append(gone, "uprobe_events "+event)
		}
	}
	return gone
}
