// Command mmlab models the Linux address-space locks and uprobes, before and
// after three kernel patch series, and runs the same experiments on the
// running kernel. See README.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"mmlab/experiment"
	"mmlab/host"
	"mmlab/live"
)

// A command is one subcommand of mmlab. Each lives in its own file (all.go
// holds all and report, which write the same report) and adds itself to
// commands from an init function.
type command struct {
	name    string
	summary string // one line for `mmlab --help`
	// run executes the subcommand with the arguments after its name and
	// returns the process exit status. ctx is cancelled on SIGINT/SIGTERM.
	run func(ctx context.Context, args []string) int
}

var commands = map[string]*command{}

func register(c *command) { commands[c.name] = c }

func usage() {
	fmt.Fprintf(os.Stderr, `mmlab: the Linux mmap_lock, per-VMA locks and uprobes, modelled in Go before and
after three kernel patch series, and measured on the running kernel.

usage: mmlab COMMAND [ARGS]

commands:
`)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(os.Stderr, `
'mmlab COMMAND --help' explains a command.

Exit status, for every command: 0 ran (and, for an experiment, judged), 1
failed or could not run a part the user asked for (the reason is on
stderr), 2 bad usage, 130 interrupted by SIGINT, 143 by SIGTERM. A live part
that cannot run here (not Linux, not root, a kernel without the feature) is
skipped with its reason under --target both and fails under --target live.
SIGINT and SIGTERM end a command within a second or two, with its cleanup
(probes detached, helpers killed and reaped, temporary files removed); a
kernel operation under way (a uprobe registration waiting for a busy
mmap_lock, a fork stuck on dup_mmap_sem) ends first: the test that sends
them measured at most 1.5 s in the quick settings on a 2-CPU machine.
`)
}

func main() {
	live.RunRole()
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "mmlab: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if gone := live.Sweep(); len(gone) > 0 {
		fmt.Fprintf(os.Stderr, "mmlab: removed what runs no longer alive left: %s\n", strings.Join(gone, ", "))
	}
	ctx, interrupted := interruptible()
	code := c.run(ctx, os.Args[2:])
	if sig := interrupted(); sig != nil {
		if code == experiment.ExitOK {
			fmt.Fprintf(os.Stderr, "mmlab: %v arrived as the %s ended: what it wrote is complete\n", sig, os.Args[1])
			code = experiment.ExitInterrupted
		}
		if sig == syscall.SIGTERM && code == experiment.ExitInterrupted {
			code = 143
		}
	}
	os.Exit(code)
}

// interruptible returns a context that SIGINT or SIGTERM cancels, and a
// function, called once as mmlab ends, that says which of them did (nil
// for none): every such signal the kernel delivered before that call
// counts, even if the goroutine that cancels had not run yet (a busy host
// may keep it waiting longer than a short run lasts). A second signal has
// its default effect: it ends mmlab at once.
func interruptible() (context.Context, func() os.Signal) {
	ctx, cancel := context.WithCancel(context.Background())
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM)
	var got os.Signal
	end, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case got = <-sigc:
		case <-end:
			select {
			case got = <-sigc:
			default:
			}
		}
		if got != nil {
			signal.Stop(sigc)
			cancel()
		}
	}()
	return ctx, func() os.Signal {
		settleSignals()
		close(end)
		<-done
		return got
	}
}

// settleSignals returns once os/signal has passed on every signal the
// kernel delivered to mmlab before the call. It sends the calling thread
// SIGWINCH twice, each after the last has come back through os/signal:
// the first is handled on the return from tgkill(2) together with any
// signal still pending for the process, so that the runtime holds every
// earlier signal before the second is sent, and the runtime passes on the
// signals it holds in order of their numbers (signal_recv), SIGINT (2) and
// SIGTERM (15) before SIGWINCH (28), whose default is to be ignored. Off
// Linux, or if a round takes more than a second, it returns early.
func settleSignals() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGWINCH)
	defer signal.Stop(c)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for range 2 {
		if host.SignalThread(syscall.SIGWINCH) != nil {
			return
		}
		select {
		case <-c:
		case <-time.After(time.Second):
			return
		}
	}
}

// writeFile creates the file at path and writes it with write.
func writeFile(path string, write func(*os.File) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
