package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"mmlab/experiment"
	"mmlab/live/calibrate"
	"mmlab/machine"
)

func init() {
	register(&command{
		name:    "calibrate",
		summary: "measure this host's primitives (syscall, switch, wake-up, IPI, fault, populate, zap, cache lines, fork, noise) as its machine description",
		run: func(ctx context.Context, args []string) int {
			return calibrateMain(ctx, args, os.Stdout, os.Stderr)
		},
	})
}

const calibrateUsage = `usage: mmlab calibrate [--out FILE] [--runs N]

Measures this host's primitives, the costs a simulated machine charges, and
writes them as the host's machine description (Linux, root; about twenty
seconds on 2 CPUs):

  syscall         getppid(2) by a raw syscall
  locked_rmw      an uncontended LOCK XADD
  context_switch  half a pipe round trip between two threads on one CPU
  wakeup          half a pipe round trip between threads on two CPUs
  ipi             membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) against a
                  thread spinning on another CPU, less the syscall
  page_fault      first-touch write faults on anonymous 4 KiB pages
  populate_page   mmap(MAP_POPULATE) of anonymous 4 KiB pages, per page
  zap_page        munmap(2) of populated anonymous 4 KiB pages, per page
  fork            fork(2) of a tiny static helper, timed in the helper
                  (x86-64), less the syscall (twice: the clock reads'
                  exit and entry around the fork are in the interval)
  fork_page       what each of 4096 present anonymous pages adds to the
                  helper's fork (copy_pte_range), per page
  line_*          a cache line's one-way hand-off (CAS ping-pong) for each
                  class of CPU pair: SMT siblings, a shared last-level
                  cache, one socket, two sockets
  instruction     one cycle at /proc/cpuinfo's clock (a model choice)
  kernel_instruction
                  openat(2) of /dev/null and close(2), less two syscalls,
                  over the 4916 kernel instructions the pair runs on 6.18
                  (counted in an emulator): what a uprobe hit's counted
                  kernel work costs here
  int3            not measured (the Go runtime owns SIGTRAP): the syscall
                  plus the published int3-versus-syscall delta
  noise           what interrupts a thread at SCHED_FIFO on each CPU, all
                  at once (as the osnoise tracer counts it): every gap
                  over 1 us between two clock reads in 500 bursts of 2 ms,
                  as a rate and the gaps' durations

It never measures a uprobe, a maps scan or any experiment's own figure.
In a VM the figures are the guest's: a line's hand-off between two vCPUs
follows where the hypervisor runs them at the time (on a 2-vCPU guest here
it was 130 ns in some runs and 32 ns in others), and an IPI or a wake-up
across vCPUs includes the hypervisor's exits.
Each measurement repeats --runs times; a cost is the median, and every run
is kept in the file. Progress goes to stderr, the description to stdout.

  --out FILE   write the description to FILE instead of the default,
               $MMLAB_HOST_FILE if set, else mmlab/host.json in the user's
               configuration directory ($XDG_CONFIG_HOME or ~/.config on
               Linux; for root usually /root/.config/mmlab/host.json)
  --runs N     repeat each measurement N times (default 11)

The file is written only when every measurement finished: an interrupted
run leaves the previous file as it was. 'mmlab machines' shows it, and a
simulated run of --machine host needs it.

Exit status: 0 written, 1 could not measure (not Linux, not root, one CPU)
or write, 2 bad usage, 130 interrupted.
`

// calibrateMain is `mmlab calibrate`, writing to out and errw.
func calibrateMain(ctx context.Context, args []string, out, errw io.Writer) int {
	fs := flag.NewFlagSet("calibrate", flag.ContinueOnError)
	fs.SetOutput(errw)
	fs.Usage = func() { fmt.Fprint(errw, calibrateUsage) }
	path := fs.String("out", "", "")
	runs := fs.Int("runs", calibrate.DefaultOptions().Runs, "")
	if err := fs.Parse(args); err != nil {
		return flagsFailed(err, nil, nil)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(errw, "mmlab calibrate: unexpected argument %q\n", fs.Arg(0))
		return experiment.ExitUsage
	}
	if *runs < 1 {
		fmt.Fprintf(errw, "mmlab calibrate: --runs %d: want at least 1\n", *runs)
		return experiment.ExitUsage
	}
	if *path == "" {
		p, err := machine.HostFile()
		if err != nil {
			fmt.Fprintf(errw, "mmlab calibrate: %v (--out FILE says where)\n", err)
			return experiment.ExitFailed
		}
		*path = p
	}
	o := calibrate.DefaultOptions()
	o.Runs = *runs
	o.Progress = func(format string, args ...any) { fmt.Fprintf(errw, format+"\n", args...) }
	c, err := calibrate.Run(ctx, o)
	switch {
	case err != nil && ctx.Err() != nil && !errors.Is(err, machine.ErrNotSupported):
		fmt.Fprintf(errw, "mmlab calibrate: interrupted; %s not written\n", *path)
		return experiment.ExitInterrupted
	case err != nil:
		fmt.Fprintf(errw, "mmlab calibrate: %v\n", err)
		return experiment.ExitFailed
	}
	if err := calibrate.Write(*path, c); err != nil {
		fmt.Fprintf(errw, "mmlab calibrate: %v\n", err)
		return experiment.ExitFailed
	}
	writeMachine(out, c.Description)
	writeCosts(out, c.Description)
	fmt.Fprintf(errw, "mmlab calibrate: wrote %s\n", *path)
	return experiment.ExitOK
}
