package experiment

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"mmlab/machine"
	"mmlab/report"
)

// Experiment is the command line's handle on one experiment: its definition
// paired with its live runner by Bind.
type Experiment interface {
	Name() string
	Seed() string
	Summary() string
	// Settings are its arguments in each setting of `mmlab all`.
	Settings() Settings
	// Main runs `mmlab run NAME args...`: parse and validate, run the jobs,
	// print the table (or the JSON document) and the verdict, and return the
	// exit status.
	Main(ctx context.Context, args []string, stdout, stderr io.Writer) int
	// Check parses and validates args as Main would, running nothing; its
	// errors wrap ErrUsage.
	Check(args []string) error
}

// isNotSupported tells "cannot run here" (machine.ErrNotSupported, which
// every live entry point wraps) from a failure: a live job that fails with
// it is skipped with its reason when the user asked for both targets.
func isNotSupported(err error) bool { return errors.Is(err, machine.ErrNotSupported) }

// Bind pairs a definition with its live runner (nil: the experiment has no
// live side).
func Bind[O Options, R Result](d Def[O, R], live Runner[O, R]) Experiment {
	return &bound[O, R]{def: d, live: live}
}

type bound[O Options, R Result] struct {
	def  Def[O, R]
	live Runner[O, R]
}

func (b *bound[O, R]) Name() string       { return b.def.Name }
func (b *bound[O, R]) Seed() string       { return b.def.Seed }
func (b *bound[O, R]) Summary() string    { return b.def.Summary }
func (b *bound[O, R]) Settings() Settings { return b.def.Settings() }

// job is one (target, variants) pair of a run.
type job[O Options, R Result] struct {
	target   Target
	variants []string
	run      Runner[O, R]
}

// invocation is a parsed and validated command line of one experiment.
type invocation[O Options, R Result] struct {
	o       O
	target  string
	machine machine.Description // the model's, from --machine
	jobs    []job[O, R]
	json    bool
	out     string
}

// errHelp is parse's answer to --help, which it has printed.
var errHelp = errors.New("help")

// parse parses and validates args, printing flag errors and --help to
// stderr; its errors wrap ErrUsage.
func (b *bound[O, R]) parse(args []string, stderr io.Writer) (*invocation[O, R], error) {
	name := b.def.Name
	inv := &invocation[O, R]{o: b.def.NewOptions()}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned; --help prints to stderr
	fs.StringVar(&inv.target, "target", "both", "model, live or both")
	variant := fs.String("variant", "", "model variants, comma-separated: "+strings.Join(b.def.Variants, ", ")+" (default: all)")
	fs.BoolVar(&inv.json, "json", false, "print one JSON document in the common schema instead of the table")
	fs.StringVar(&inv.out, "out", "", "also save the JSON document as DIR/"+name+".json")
	machineName := fs.String("machine", "host", MachineUsage)
	inv.o.Flags(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), b.def.Help)
		fmt.Fprintln(fs.Output())
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nexit status: 0 ran and judged, 1 a check failed or a part asked for could not run, 2 bad usage, 130 interrupted (143 by SIGTERM)\n")
	}
	usage := func(err error) (*invocation[O, R], error) { return nil, fmt.Errorf("%w: %v", ErrUsage, err) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fs.Usage()
			return nil, errHelp
		}
		return usage(fmt.Errorf("%v (mmlab run %s --help lists the flags)", err, name))
	}
	if fs.NArg() > 0 {
		return usage(fmt.Errorf("unexpected argument %q (mmlab run %s --help lists the flags)", fs.Arg(0), name))
	}
	if err := OneOf("target", inv.target, string(Model), string(Live), "both"); err != nil {
		return usage(err)
	}
	var err error
	variants := b.def.Variants
	if *variant != "" {
		if variants, err = List("variant", *variant, b.def.Variants...); err != nil {
			return usage(err)
		}
	}
	if inv.machine, err = ParseMachine(*machineName); err != nil {
		return usage(err)
	}
	if err := inv.o.Validate(); err != nil {
		return usage(err)
	}
	if inv.target != string(Live) && b.def.Model != nil {
		inv.jobs = append(inv.jobs, job[O, R]{Model, variants, b.def.Model})
	}
	if inv.target != string(Model) {
		if b.live == nil {
			if inv.target == string(Live) {
				return usage(fmt.Errorf("--target live: %s has no live side", name))
			}
		} else {
			inv.jobs = append(inv.jobs, job[O, R]{Live, []string{VariantKernel}, b.live})
			if err := HostOnly(inv.machine); err != nil {
				return usage(err)
			}
		}
	}
	return inv, nil
}

func (b *bound[O, R]) Check(args []string) error {
	_, err := b.parse(args, io.Discard)
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

func (b *bound[O, R]) Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	name := b.def.Name
	inv, err := b.parse(args, stderr)
	switch {
	case errors.Is(err, errHelp):
		return ExitOK
	case err != nil:
		fmt.Fprintf(stderr, "mmlab run %s: %s\n", name, strings.TrimPrefix(err.Error(), ErrUsage.Error()+": "))
		return ExitUsage
	}
	o, jobs, asJSON, out, target := inv.o, inv.jobs, &inv.json, &inv.out, &inv.target
	doc := report.NewDocument[O, R](name, inv.machine, o)
	status := ExitOK
	for _, j := range jobs {
		if ctx.Err() != nil {
			break
		}
		env := Env{
			Variants: j.variants,
			Machine:  inv.machine,
			Progress: func(format string, a ...any) {
				fmt.Fprintf(stderr, "%s %s: %s\n", name, j.target, fmt.Sprintf(format, a...))
			},
		}
		env.Progress("started (%s)", strings.Join(j.variants, ", "))
		n := 0
		err := j.run(ctx, o, env, func(r R) {
			doc.Results = append(doc.Results, r)
			n++
			env.Progress("result %d done", n)
		})
		switch {
		case err == nil:
		case ctx.Err() != nil:
		case isNotSupported(err) && *target == "both":
			fmt.Fprintf(stderr, "mmlab run %s: %s part skipped: %v\n", name, j.target, err)
			doc.Skipped = append(doc.Skipped, fmt.Sprintf("%s: %v", j.target, err))
		default:
			fmt.Fprintf(stderr, "mmlab run %s: %s: %v\n", name, j.target, err)
			status = ExitFailed
		}
	}
	if ctx.Err() != nil {
		doc.Interrupted = true
	}
	if b.def.Verdict != nil && len(doc.Results) > 0 && !doc.Interrupted {
		line, failed := b.def.Verdict(o, doc.Results)
		doc.Verdict = line
		if failed {
			fmt.Fprintf(stderr, "mmlab run %s: the check failed: %s\n", name, line)
			status = ExitFailed
		}
	}
	if *out != "" {
		if err := doc.Save(*out); err != nil {
			fmt.Fprintf(stderr, "mmlab run %s: --out: %v\n", name, err)
			status = ExitFailed
		}
	}
	if *asJSON {
		if err := doc.WriteJSON(stdout); err != nil {
			fmt.Fprintf(stderr, "mmlab run %s: %v\n", name, err)
			return ExitFailed
		}
	} else {
		b.def.Table(stdout, o, doc.Results)
		if doc.Verdict != "" {
			fmt.Fprintln(stdout, doc.Verdict)
		}
	}
	if doc.Interrupted {
		fmt.Fprintf(stderr, "mmlab run %s: interrupted; the table shows the results that finished\n", name)
		return ExitInterrupted
	}
	return status
}
