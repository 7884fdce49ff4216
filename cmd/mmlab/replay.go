package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"mmlab/experiment"
	"mmlab/trace"
)

var replayHelp = fmt.Sprintf(`usage: mmlab replay [--target model|live] [--machine NAME] TRACE

Runs a trace of address-space operations (TRACE is a file, or - for stdin) on
the model (the default) or on the live kernel, in a fresh process with real
system calls, a real fork() and real loads and stores. Both print the same
lines: /proc/PID/maps lines, empty lines, peek lines and error lines. The
model runs on --machine: host (the default, this host's features, as the
live kernel has them) or a named description ('mmlab machines' lists them),
whose protection keys and mmap_min_addr the model's answers follow.

%s
Exit status: 0 when the trace ran (even if ops failed), 2 when it is malformed
("LINE: what is wrong" on stderr), 1 when TRACE cannot be read or the target
cannot run. Both targets refuse the same traces with the same message.
'mmlab gen' prints a random trace.

flags:
`, trace.Language)

func init() {
	register(&command{
		name:    "replay",
		summary: "run a trace of mmap/munmap/mremap/fork/... ops on the model or the live kernel",
		run: func(ctx context.Context, args []string) int {
			return runReplay(ctx, args, os.Stdin, os.Stdout, os.Stderr)
		},
	})
}

// runReplay is `mmlab replay`, with its standard streams as arguments.
func runReplay(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	target := fs.String("target", "model", "where the trace runs: model or live")
	machineName := fs.String("machine", "host", experiment.MachineUsage)
	fs.Usage = func() {
		fmt.Fprint(stderr, replayHelp)
		fs.PrintDefaults()
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return flagsFailed(err, nil, nil)
	}
	if *target != "model" && *target != "live" {
		fmt.Fprintf(stderr, "mmlab replay: --target %q: want model or live\n", *target)
		return 2
	}
	mach, err := experiment.ParseMachine(*machineName)
	if err == nil && *target == "live" {
		err = experiment.HostOnly(mach)
	}
	if err != nil {
		fmt.Fprintf(stderr, "mmlab replay: %v\n", err)
		return 2
	}
	if len(pos) != 1 {
		if len(pos) > 1 {
			fmt.Fprintf(stderr, "mmlab replay: want one TRACE, not %d\n", len(pos))
		}
		fs.Usage()
		return 2
	}
	p, code := readTrace(pos[0], stdin, stderr)
	if p == nil {
		return code
	}
	// Refuse a trace that does not fit the machine it runs on (an arena
	// above its TASK_SIZE) here, once, as Parse refuses a malformed one.
	// The runners check the same again.
	if err := p.ValidateFor(mach.Features); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	run := replayTargets[*target]
	// A closed stdout (mmlab replay ... | head) or terminal must end the run
	// through ctx or an EPIPE error, so that Run removes what it created,
	// rather than kill mmlab outright.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGHUP)
	defer stop()
	w := bufio.NewWriter(stdout)
	err = run(ctx, mach, p, w)
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "mmlab replay: interrupted")
		return 130
	case err != nil:
		fmt.Fprintf(stderr, "mmlab replay: %s: %v\n", *target, err)
		return 1
	}
	return 0
}

// readTrace reads and parses the trace at path ("-" for stdin). On failure
// it prints why and returns nil and the exit status: 2 when malformed, 1 when
// unreadable.
func readTrace(path string, stdin io.Reader, stderr io.Writer) (*trace.Program, int) {
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintf(stderr, "mmlab replay: %v\n", err)
			return nil, 1
		}
		defer f.Close()
		r = f
	}
	p, err := trace.Parse(r)
	if err != nil {
		var se *trace.SyntaxError
		if errors.As(err, &se) {
			fmt.Fprintln(stderr, se)
			return nil, 2
		}
		fmt.Fprintf(stderr, "mmlab replay: %v\n", err)
		return nil, 1
	}
	return p, 0
}
