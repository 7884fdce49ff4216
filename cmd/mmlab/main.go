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
	"strings"
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

func init() {
	register(&command{
		name:    "all",
		summary: "run every experiment in a quick setting, model and live",
		run:     runAll,
	})
}

// runAll runs the quick step of every command that has one, in order, and
// fails if any failed. It stops early when interrupted.
func runAll(ctx context.Context, args []string) int {
	if len(args) > 0 {
		fmt.Fprintf(os.Stderr, "usage: mmlab all\n\nRuns every experiment in a quick setting on the model and, on Linux, the live kernel.\n")
		if args[0] == "-h" || args[0] == "--help" {
			return 0
		}
		return 2
	}
	var steps []*command
	for _, m := range []map[string]*command{commands, experiments} {
		for _, c := range m {
			if c.quick != nil {
				steps = append(steps, c)
			}
		}
	}
	slices.SortFunc(steps, func(a, b *command) int {
		if a.order != b.order {
			return a.order - b.order
		}
		return strings.Compare(a.name, b.name)
	})
	failed := 0
	for _, e := range boundExperiments {
		if ctx.Err() != nil {
			return 130
		}
		fmt.Printf("==> mmlab run %s %s\n", e.Name(), strings.Join(e.QuickArgs(), " "))
		if code := e.Main(ctx, e.QuickArgs(), os.Stdout, os.Stderr); code != 0 {
			fmt.Fprintf(os.Stderr, "mmlab all: %s exited %d\n", e.Name(), code)
			failed++
		}
	}
	for _, c := range steps {
		if ctx.Err() != nil {
			return 130
		}
		fmt.Printf("==> mmlab %s (quick)\n", c.name)
		if code := c.quick(ctx); code != 0 {
			fmt.Fprintf(os.Stderr, "mmlab all: %s exited %d\n", c.name, code)
			failed++
		}
	}
	if failed > 0 {
		return 1
	}
	return 0
}
