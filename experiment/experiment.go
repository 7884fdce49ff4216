// Package experiment is what every experiment of mmlab has in common: the
// definition each experiment package fills in once (name, seed, options and
// their validation, typed results, table, verdict), the two targets, and the
// one path from command-line flags to jobs, results, table and JSON that
// `mmlab run` and `mmlab all` use for every experiment. It links no model
// package (machine, which it imports, only describes one): a model runner
// builds its kernel and processes with package binfmt.
//
// An experiment lives in experiment/<name>: its Def and its model runner,
// in pure Go. Its live runner lives in mmlab/live/<name>, which imports the
// definition; Bind pairs the two. Nothing here or in experiment/<name>
// imports the live side.
package experiment

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"mmlab/machine"
)

// Target is where an experiment runs.
type Target string

const (
	Model Target = "model" // the Go model, in this process, in real time
	Live  Target = "live"  // the running kernel (Linux, root)
	// Sim is the Go model on a simulated machine (--machine NAME): one
	// model thread at a time on virtual CPUs, in virtual time, scheduled
	// as Linux schedules, each kernel entry charged what the machine's
	// description says it costs. The same machine and seed give the same
	// results.
	Sim Target = "sim"
)

// IsModel reports whether t runs the model: Model or Sim.
func (t Target) IsModel() bool { return t == Model || t == Sim }

// Label returns t as a table names it: "sim:NAME" for a result on the
// simulated machine NAME, t alone where machine is empty.
func (t Target) Label(machine string) string {
	if machine == "" {
		return string(t)
	}
	return string(t) + ":" + machine
}

// SimRun is how a sim target's simulated machines run.
type SimRun struct {
	// Seed breaks the ties of the simulated scheduler (--sim-seed).
	Seed uint64
	// Until bounds each simulated machine's run in virtual time
	// (--sim-until): a run that reaches it before its work is done fails.
	Until time.Duration
}

// VariantKernel is the variant of every live result: the running kernel.
const VariantKernel = "kernel"

// Row is embedded first in every typed result: where the result was
// measured. Its JSON keys are the common schema's "target" and "variant".
type Row struct {
	Target  Target `json:"target"`
	Variant string `json:"variant"`
}

// LiveRow is the row of every live result: the running kernel.
var LiveRow = Row{Target: Live, Variant: VariantKernel}

// Where returns r; it makes every result that embeds a Row a Result.
func (r Row) Where() Row { return r }

// Result is a typed result of any experiment.
type Result interface{ Where() Row }

// Options is implemented by a pointer to an experiment's options struct,
// whose JSON encoding is the "params" of its document: the flags, typed
// (each parses into its field, as Bytes, Duration, NamesVar and CountsVar
// do), and the values a run chose itself, in fields no flag sets.
type Options interface {
	// Flags registers the options on fs; the struct's current values are
	// the defaults shown by --help.
	Flags(fs *flag.FlagSet)
	// Validate checks every option against what the experiment can do,
	// once, before anything runs. Its errors name the flag, the value and
	// what is allowed.
	Validate() error
}

// TargetsValidator is implemented by Options with an option that only
// some targets take: ValidateTargets checks the options against the
// targets of the run (in ParseTargets' order), after Validate. Its errors
// name the flag and the targets that take it.
type TargetsValidator interface {
	ValidateTargets(targets []Target) error
}

// Env is what a runner gets besides its options.
type Env struct {
	// Target is where the runner runs: Model or Sim for a model runner,
	// Live for a live one ("" is Model). Every result's Row says it
	// (Row).
	Target Target
	// Sim is how a Sim target's machines run; nil on the other targets.
	// A model runner builds its kernels on simulated machines when it is
	// set (binfmt.NewSimKernel) and never reads the host's clock.
	Sim *SimRun
	// Variants are the model variants to run, in order (model runners
	// only); live runners run VariantKernel.
	Variants []string
	// Machine is the machine the model runs on (--machine): a model
	// runner builds every model kernel and address space on it. Live
	// runners run on this host and do not read it.
	Machine machine.Description
	// Progress reports a step of a long run; it is never nil. (What a run
	// chooses itself, a calibrated size, it records in its options' fields
	// that no flag sets: they are the document's params.)
	Progress func(format string, args ...any)
}

// Row is the Row of a result of variant on the runner's target: Model
// for an Env that names none (a model runner called directly, as tests
// call one).
func (e Env) Row(variant string) Row {
	if e.Target == "" {
		return Row{Target: Model, Variant: variant}
	}
	return Row{Target: e.Target, Variant: variant}
}

// Runner runs an experiment on one target and emits each result when it is
// complete, so that an interrupted run keeps what finished.
type Runner[O Options, R Result] func(ctx context.Context, o O, env Env, emit func(R)) error

// Def is one experiment's definition.
type Def[O Options, R Result] struct {
	Name     string   // the argument of `mmlab run`
	Seed     string   // the seed it reproduces: "000", "003" or "004"
	Summary  string   // one line for `mmlab run --help`
	Help     string   // what --help prints before the flags
	Variants []string // the model's variants, in table order
	// NewOptions returns the options with their defaults.
	NewOptions func() O
	// Settings are the experiment's arguments in each setting of `mmlab
	// all`, the one place they are written; a func because a full setting
	// may depend on the host (its CPUs, its memory).
	Settings func() Settings
	// Model runs the experiment on the model.
	Model Runner[O, R]
	// Sim says Model also runs on simulated machines (--target sim):
	// it builds its kernels with binfmt.NewSimKernel when Env.Sim is set
	// and reads the model's clock (sched.Now), never the host's. A
	// runner without it is refused the target, so that no sim result is
	// timed by the host.
	Sim bool
	// Table prints the results in the seed's format.
	Table func(w io.Writer, o O, rs []R)
	// Verdict, if set, judges the results in one line ("verdict: ...") and
	// says whether the run failed its check (exit status 1).
	Verdict func(o O, rs []R) (line string, failed bool)
}

// Settings are an experiment's arguments in the settings of `mmlab all`
// and how long each takes on both targets.
type Settings struct {
	Quick []string // the default setting
	Full  []string // the seed's own
	Smoke []string // the smallest that runs every part (tests)
	// EstQuick and EstFull are the expected run time of both targets,
	// for the progress line and the full setting's announcement.
	EstQuick, EstFull time.Duration
	// Sim, if set, is the experiment's sim step in mmlab all: the seed's
	// own table on the seed's machine (--target sim).
	Sim *SimSettings
}

// SimSettings are an experiment's arguments on a simulated machine in the
// settings of `mmlab all`: the column "sim, <Machine>" of its seed's table.
type SimSettings struct {
	// Machine is the named description the seed's table ran on
	// (machine.Named).
	Machine string
	// Quick, Full and Smoke are the arguments in each setting, without
	// --target, --machine and --out (mmlab all adds them).
	Quick, Full, Smoke []string
	// Points, if set, are Full split into the independent points of a
	// sweep (each an argument list as Full), run one per index by
	// `mmlab all --full --point I` (a Kubernetes Indexed Job's completion
	// index) and merged by `mmlab report`. Nil: Full is one point.
	Points [][]string
	// EstQuick and EstFull are the host time each setting takes.
	EstQuick, EstFull time.Duration
}

// VerdictLine is a Verdict's line for judgement: "verdict: " and it, or
// "" for none.
func VerdictLine(judgement string) string {
	if judgement == "" {
		return ""
	}
	return "verdict: " + judgement
}

// ErrUsage marks an error in the command line (exit status 2).
var ErrUsage = errors.New("usage")

// Exit statuses of `mmlab run` and `mmlab all`.
const (
	ExitOK          = 0   // ran and judged
	ExitFailed      = 1   // a check failed, or a part the user asked for could not run
	ExitUsage       = 2   // bad command line
	ExitInterrupted = 130 // SIGINT or SIGTERM
)

// Parse errors and helpers shared by the experiments' option checks.

// OneOf checks that --flag's value is one of choices.
func OneOf(flagName, value string, choices ...string) error {
	if slices.Contains(choices, value) {
		return nil
	}
	return fmt.Errorf("--%s %q: want one of %s", flagName, value, strings.Join(choices, ", "))
}

// List splits a comma-separated --flag value and checks each item against
// choices; an empty value is an error.
func List(flagName, value string, choices ...string) ([]string, error) {
	if value == "" {
		return nil, fmt.Errorf("--%s is empty: want a comma-separated list of %s", flagName, strings.Join(choices, ", "))
	}
	items := strings.Split(value, ",")
	for _, it := range items {
		if !slices.Contains(choices, it) {
			return nil, fmt.Errorf("--%s: unknown %q: want a comma-separated list of %s", flagName, it, strings.Join(choices, ", "))
		}
	}
	return items, nil
}

// Counts splits a comma-separated --flag value of counts and checks each is
// from lo to hi.
func Counts(flagName, value string, lo, hi int) ([]int, error) {
	var ns []int
	for _, it := range strings.Split(value, ",") {
		n, err := strconv.Atoi(it)
		if err != nil || n < lo || n > hi {
			return nil, fmt.Errorf("--%s %s: %q: want a comma-separated list of counts from %d to %d", flagName, value, it, lo, hi)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// MachineUsage is the help of --machine, which every model-only command
// takes.
const MachineUsage = "the machine the model runs on: host (this host's protection keys, la57, mmap_min_addr and CAP_SYS_RAWIO) or a named description ('mmlab machines' lists them); the live kernel is this host's, so a named machine runs the model alone (--target model)"

// ParseMachine returns the description --machine names: machine.Host()
// for "host", else a named description. An unknown name's error names the
// flag, the value and the names allowed, and wraps machine.ErrUnknown.
func ParseMachine(value string) (machine.Description, error) {
	d, err := machine.Lookup(value)
	if err != nil {
		return d, fmt.Errorf("--machine %q: %w: want one of %s (mmlab machines describes them)", value, machine.ErrUnknown, strings.Join(machine.Names(), ", "))
	}
	return d, nil
}

// HostOnly is the check of --machine d for a run with a live part: a live
// result is compared with the model's, so the model of such a run is built
// from machine.Host(), and a named machine is refused.
func HostOnly(d machine.Description) error {
	if d.Name != "host" {
		return fmt.Errorf("--machine %s: a named machine runs the model alone (--target model): a live result is compared with a model of this host", d.Name)
	}
	return nil
}

// ParseOptions parses args, flags of the experiment's own, into o and
// validates it, as `mmlab run` does.
func ParseOptions(o Options, args ...string) error {
	fs := flag.NewFlagSet("options", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.Flags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	return o.Validate()
}
