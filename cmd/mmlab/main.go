// Command mmlab models the Linux address-space locks and uprobes, before and
// after three kernel patch series, and runs the same experiments on the
// running kernel. See README.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"mmlab/live"
)

// A command is one subcommand of mmlab. Each lives in its own file and adds
// itself to commands from an init function.
type command struct {
	name    string
	summary string // one line for `mmlab --help`
	// run executes the subcommand with the arguments after its name and
	// returns the process exit status. ctx is cancelled on SIGINT/SIGTERM.
	run func(ctx context.Context, args []string) int
	// quick, if set, is what `mmlab all` runs for this command: a short
	// setting of its experiment. order sorts the steps of `all`.
	quick func(ctx context.Context) int
	order int
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
	fmt.Fprintf(os.Stderr, "\n'mmlab COMMAND --help' explains a command.\n")
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := c.run(ctx, os.Args[2:])
	stop()
	os.Exit(code)
}
