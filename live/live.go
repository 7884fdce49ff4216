// Package live holds what every live part of mmlab shares: the one
// ErrNotSupported that each live entry point wraps when it cannot run here
// (not Linux, not root, a kernel too old or without a feature), and the one
// way a live experiment starts a helper process: a re-execution of the
// running binary in a registered role, dispatched explicitly by main (or a
// test's TestMain) through RunRole.
//
// What a live run creates outside its own memory, and how each goes when
// the run is killed:
//   - helper processes (and the processes they fork): they die with the
//     run (Start);
//   - BPF programs, maps and links, perf events, uprobes: bound to its file
//     descriptors, the kernel releases them when the process dies, and
//     with the uprobes their breakpoints, which live only in the probed
//     processes' private copies of the text (uprobes break COW: the page
//     cache is never written);
//   - ftrace instances, the probed copy of the binary under TMPDIR, and
//     legacy uprobe_events entries (kernels before 4.17): named with the
//     run's RunName, and removed by the next run (Sweep);
//   - the tracefs mount, where tracefs was mounted nowhere: left, as perf
//     leaves it.
package live

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"

	"mmlab/machine"
)

// ErrNotSupported is wrapped by every live entry point that cannot run on
// this machine: machine.ErrNotSupported, the sentinel every package tests
// with errors.Is.
var ErrNotSupported = machine.ErrNotSupported

// Unsupported returns a *machine.UnsupportedError whose message says what is
// missing ("needs root").
func Unsupported(format string, args ...any) error {
	return &machine.UnsupportedError{What: fmt.Sprintf(format, args...)}
}

// UnsupportedSince is Unsupported for a kernel feature that Linux release
// minKernel ("6.11") added.
func UnsupportedSince(minKernel, format string, args ...any) error {
	return &machine.UnsupportedError{What: fmt.Sprintf(format, args...), MinKernel: minKernel}
}

// UnsupportedRunner returns a live experiment runner that starts nothing
// and returns Unsupported(format, args...): the live side of an experiment
// on a system that cannot run it. E is the experiment's Env, a type
// parameter so that this package need not import the experiment layer.
func UnsupportedRunner[O, E, R any](format string, args ...any) func(context.Context, O, E, func(R)) error {
	return func(context.Context, O, E, func(R)) error { return Unsupported(format, args...) }
}

// IsRoot reports whether the process runs with effective uid 0.
func IsRoot() bool { return os.Geteuid() == 0 }

// roleEnv names the role a re-executed mmlab runs.
const roleEnv = "MMLAB_ROLE"

var roles = map[string]func() int{}

// RegisterRole adds a helper role: main is what a re-executed binary runs
// in that role, returning its exit status. Live packages register their
// roles from init; nothing runs until RunRole is called.
func RegisterRole(name string, main func() int) {
	if _, dup := roles[name]; dup {
		panic("live: role registered twice: " + name)
	}
	roles[name] = main
}

// RunRole runs the role this process was started in, if any, and exits with
// its status; otherwise it returns. A helper that Start started exits when
// its parent has. main calls it first, and so does the
// TestMain of every package whose tests start helpers.
func RunRole() {
	watchParent()
	name := os.Getenv(roleEnv)
	if name == "" {
		return
	}
	main, ok := roles[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "mmlab: unknown helper role %q\n", name)
		os.Exit(2)
	}
	os.Exit(main())
}

// RunTests is the TestMain of a live package whose tests start helpers: it
// runs the role this test binary was started in, if any (RunRole), and
// otherwise the tests (m is the *testing.M), exiting with their status.
func RunTests(m interface{ Run() int }) {
	RunRole()
	os.Exit(m.Run())
}

// ErrUnknownRole is returned by Command for a role nobody registered.
var ErrUnknownRole = errors.New("unknown helper role")

// Command returns a command that re-executes this binary in role, with env
// ("KEY=value") added to this process's environment. The caller sets up its
// files and process attributes and starts it.
func Command(ctx context.Context, role string, env ...string) (*exec.Cmd, error) {
	if _, ok := roles[role]; !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownRole, role)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(slices.Clone(os.Environ()), append([]string{roleEnv + "=" + role}, env...)...)
	return cmd, nil
}

// sweepers remove, each for one kind of thing a run leaves outside its
// memory, what runs no longer alive left (Dead), returning a name for each
// thing removed.
var sweepers []func() []string

// RegisterSweeper adds a sweeper; live packages register theirs from init.
func RegisterSweeper(sweep func() []string) { sweepers = append(sweepers, sweep) }

// Sweep removes what runs no longer alive left (a killed run's tracefs
// instances and temporary directories) and returns what it removed. Every
// mmlab run calls it first; a sweeper that may not remove something (not
// root) leaves it.
func Sweep() []string {
	var gone []string
	for _, s := range sweepers {
		gone = append(gone, s()...)
	}
	return gone
}
