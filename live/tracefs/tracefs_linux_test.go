package tracefs

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"mmlab/live"
)

// newMono returns a new instance with the mono clock, and skips the test
// where this host has no tracefs instances.
func newMono(t *testing.T) *Instance {
	t.Helper()
	in, err := New("mono")
	if errors.Is(err, live.ErrNotSupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// An instance has the clock asked for, starts stopped, records the events
// enabled, and is gone after Close.
func TestInstance(t *testing.T) {
	in := newMono(t)
	dir := in.Dir()
	defer func() {
		if _, err := os.Stat(dir); err == nil {
			in.Close()
		}
	}()
	if got := Leftovers(); len(got) != 1 || got[0] != dir {
		t.Errorf("instances %v, want [%s]", got, dir)
	}
	read := func(file string) string {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if c := read("trace_clock"); !strings.Contains(c, "[mono]") {
		t.Errorf("trace_clock %q", c)
	}
	if on := read("tracing_on"); on != "0" {
		t.Errorf("a new instance has tracing_on %s", on)
	}
	if err := in.SetEvent("lock/contention_begin", "filter", "flags & 6"); err != nil {
		t.Fatal(err)
	}
	if err := in.Enable("lock/contention_begin", "lock/contention_end"); err != nil {
		t.Fatal(err)
	}
	if f := read("events/lock/contention_begin/filter"); f != "flags & 6" {
		t.Errorf("filter %q", f)
	}
	if e := read("events/lock/contention_end/enable"); e != "1" {
		t.Errorf("enable %q", e)
	}
	if err := in.SetPIDs(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if p := read("set_event_pid"); p != strconv.Itoa(os.Getpid()) {
		t.Errorf("set_event_pid %q", p)
	}
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	if err := in.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, lost, err := in.Events(); err != nil || lost != 0 {
		t.Errorf("events: %d lost, %v", lost, err)
	}
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Close: %v", err)
	}
	if got := Leftovers(); len(got) != 0 {
		t.Errorf("instances left %v", got)
	}
}

// childEnv runs TestRoot's body in a child process with its own mount
// namespace, where unmounting tracefs changes nothing outside.
const childEnv = "MMLAB_TRACEFS_CHILD"

// On a host without tracefs mounted (a fresh VM), Root mounts it at
// /sys/kernel/tracing as perf does and leaves it mounted; where the mount
// is refused, the error says what to run. Pins: tools/lib/api/fs/fs.c
// fs__mount().
func TestRoot(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		rootChild(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounting tracefs needs CAP_SYS_ADMIN")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRoot$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	if err != nil {
		t.Fatalf("child: %v", err)
	}
}

// rootChild runs in the child's private mount namespace. Where debugfs is
// mounted (systemd mounts it at boot), looking up its tracing directory
// mounts tracefs there again (kernel/trace/trace.c: tracing_init_dentry's
// debugfs_create_automount("tracing", ..., trace_automount)), so that
// mounted() would find one for ever: debugfs goes first, in this namespace
// only.
func rootChild(t *testing.T) {
	if err := unix.Unmount("/sys/kernel/debug", unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		t.Fatalf("umount /sys/kernel/debug: %v", err)
	}
	for mounted() != "" {
		if err := unix.Unmount(mounted(), unix.MNT_DETACH); err != nil {
			t.Fatalf("umount %s: %v", mounted(), err)
		}
	}
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil || st.Type != unix.TRACEFS_MAGIC || root != "/sys/kernel/tracing" {
		t.Fatalf("Root() = %s, statfs type %#x (%v), want tracefs at /sys/kernel/tracing", root, st.Type, err)
	}
	in, err := New("mono")
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	if got := mounted(); got != root {
		t.Errorf("after the instance closed, tracefs is mounted at %q, want it left at %s", got, root)
	}

	// Without CAP_SYS_ADMIN the mount is refused, and the error says so.
	if err := unix.Unmount(root, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setresuid(65534, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err = Root()
	if !errors.Is(err, live.ErrNotSupported) || !strings.Contains(err.Error(), "mount -t tracefs nodev /sys/kernel/tracing") {
		t.Errorf("Root() as nobody: %v, want ErrNotSupported saying what to run", err)
	}
	t.Log(err)
}

// The next run removes the instance of a run that is no longer alive, and
// leaves this one's.
func TestSweep(t *testing.T) {
	in := newMono(t)
	defer in.Close()
	// This pid with another start time: a run that has ended.
	f := strings.Split(live.RunName("-"), "-")
	dead := filepath.Join(filepath.Dir(in.Dir()), prefix+f[0]+"-1-"+f[2]+"-1")
	if err := os.Mkdir(dead, 0o700); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(dead)
	gone := sweep()
	if len(gone) != 1 || gone[0] != "tracefs instance "+filepath.Base(dead) {
		t.Errorf("sweep removed %q, want the dead run's instance only", gone)
	}
	for dir, want := range map[string]bool{dead: false, in.Dir(): true} {
		if _, err := os.Stat(dir); (err == nil) != want {
			t.Errorf("%s: %v after the sweep, want it there: %v", dir, err, want)
		}
	}
}
