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

	"mmlab/host"
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
	// print the table (or the JSON document), the live run's steal time
	// (report.Steal) and the verdict, and return the exit status.
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
	sim     *SimRun             // --seed and --sim-until of a sim job
	jobs    []job[O, R]
	point   *report.SweepPoint // --sweep-point
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
	fs.StringVar(&inv.target, "target", "both", "where to run: model (real time), sim (a simulated machine, --machine NAME), live, both (model and live), or a comma-separated list of model, sim and live")
	variant := fs.String("variant", "", "model variants, comma-separated: "+strings.Join(b.def.Variants, ", ")+" (default: all)")
	fs.BoolVar(&inv.json, "json", false, "print one JSON document in the common schema instead of the table")
	fs.StringVar(&inv.out, "out", "", "also save the JSON document as DIR/"+name+".json")
	machineName := fs.String("machine", "host", MachineUsage+"; --target sim runs on the description's CPUs, clock and costs (host: this host's as mmlab calibrate measured them)")
	sim := SimRun{Seed: 1, Until: DefaultSimUntil}
	fs.Uint64Var(&sim.Seed, "sim-seed", sim.Seed, "sim: seed of the simulated scheduler's ties (the same machine and seed give the same output)")
	Var(fs, (*Duration)(&sim.Until), "sim-until", "sim: bound of each simulated machine's run in virtual time")
	point := fs.String("sweep-point", "", "I/N: the document holds point I (from 0) of a sweep of N points, as mmlab all --full --point I runs it; mmlab report merges the points")
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
	targets, err := ParseTargets(inv.target)
	if err != nil {
		return usage(err)
	}
	if *point != "" {
		if inv.point, err = ParseSweepPoint(*point); err != nil {
			return usage(err)
		}
	}
	variants := b.def.Variants
	if *variant != "" {
		if variants, err = List("variant", *variant, b.def.Variants...); err != nil {
			return usage(err)
		}
	}
	if inv.machine, err = ParseMachine(*machineName); err != nil {
		return usage(err)
	}
	if slices.Contains(targets, Sim) {
		if inv.machine, err = ParseSimMachine(*machineName); err != nil {
			return usage(err)
		}
		if sim.Until <= 0 {
			return usage(fmt.Errorf("--sim-until %v: want a positive duration", sim.Until))
		}
		inv.sim = &sim
	}
	if err := inv.o.Validate(); err != nil {
		return usage(err)
	}
	if tv, ok := any(inv.o).(TargetsValidator); ok {
		if err := tv.ValidateTargets(targets); err != nil {
			return usage(err)
		}
	}
	for _, t := range targets {
		if t == Sim && b.def.Model != nil && !b.def.Sim {
			return usage(fmt.Errorf("--target sim: %s's model runner does not run on a simulated machine (it times and sleeps on the host's clock)", name))
		}
		switch {
		case t != Live && b.def.Model != nil:
			inv.jobs = append(inv.jobs, job[O, R]{t, variants, b.def.Model})
		case t == Live && b.live != nil:
			inv.jobs = append(inv.jobs, job[O, R]{Live, []string{VariantKernel}, b.live})
			if err := HostOnly(inv.machine); err != nil {
				return usage(err)
			}
		case len(targets) == 1:
			return usage(fmt.Errorf("--target %s: %s has no %s side", t, name, t))
		}
	}
	return inv, nil
}

// ParseSweepPoint parses --sweep-point I/N: N at least 1, I from 0 to
// N-1.
func ParseSweepPoint(value string) (*report.SweepPoint, error) {
	i, n, ok := strings.Cut(value, "/")
	index, err1 := strconv.Atoi(i)
	of, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil || of < 1 || index < 0 || index >= of {
		return nil, fmt.Errorf("--sweep-point %q: want I/N, point I of N points, I from 0 to N-1", value)
	}
	return &report.SweepPoint{Index: index, Of: of}, nil
}

// DefaultSimUntil is --sim-until's default: a bound that no run of the
// settings of mmlab all reaches.
const DefaultSimUntil = time.Hour

// ParseTargets parses --target: "both" (model and live), or a
// comma-separated list of model, sim and live, each at most once. The
// targets run in the order model, sim, live.
func ParseTargets(value string) ([]Target, error) {
	if value == "both" {
		return []Target{Model, Live}, nil
	}
	items := strings.Split(value, ",")
	for _, it := range items {
		if !slices.Contains([]string{string(Model), string(Sim), string(Live)}, it) {
			return nil, fmt.Errorf("--target %q: want model, sim, live, both (model and live) or a comma-separated list of model, sim and live", value)
		}
	}
	var ts []Target
	for _, t := range []Target{Model, Sim, Live} {
		switch n := slices.Index(items, string(t)); {
		case n < 0:
		case slices.Index(items[n+1:], string(t)) >= 0:
			return nil, fmt.Errorf("--target %s: %s given twice", value, t)
		default:
			ts = append(ts, t)
		}
	}
	return ts, nil
}

// ParseSimMachine returns the description a sim run takes from --machine
// (machine.Simulated): a named description, or for host the one mmlab
// calibrate wrote; without it the error wraps machine.ErrNotCalibrated and
// names mmlab calibrate.
func ParseSimMachine(value string) (machine.Description, error) {
	d, err := machine.Simulated(value)
	switch {
	case errors.Is(err, machine.ErrUnknown):
		return d, fmt.Errorf("--machine %q: %w: want one of %s (mmlab machines describes them)", value, machine.ErrUnknown, strings.Join(machine.Names(), ", "))
	case err != nil:
		return d, fmt.Errorf("--target sim --machine %s: %w", value, err)
	}
	return d, nil
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
	o, jobs, asJSON, out := inv.o, inv.jobs, &inv.json, &inv.out
	doc := report.NewDocument[O, R](name, inv.machine, o)
	doc.Point = inv.point
	status := ExitOK
	for _, j := range jobs {
		if ctx.Err() != nil {
			break
		}
		env := Env{
			Target:   j.target,
			Variants: j.variants,
			Machine:  inv.machine,
			Progress: func(format string, a ...any) {
				fmt.Fprintf(stderr, "%s %s: %s\n", name, j.target, fmt.Sprintf(format, a...))
			},
		}
		env.Progress("started (%s)", strings.Join(j.variants, ", "))
		if j.target == Sim {
			env.Sim = inv.sim
		}
		n := 0
		var wrongRow error
		var stealBefore map[int]time.Duration // the CPUs' steal time (nil: not a live job, or none to read)
		if j.target == Live {
			stealBefore, _ = host.Steal()
		}
		start := time.Now()
		err := j.run(ctx, o, env, func(r R) {
			if w := r.Where(); w.Target != j.target && wrongRow == nil {
				wrongRow = fmt.Errorf("a result of the %s runner says target %s", j.target, w.Target)
			}
			doc.Results = append(doc.Results, r)
			n++
			env.Progress("result %d done", n)
		})
		if err == nil {
			err = wrongRow
		}
		if stealBefore != nil {
			if after, err := host.Steal(); err == nil {
				doc.Steal = report.StealDuring(stealBefore, after, time.Since(start))
			}
		}
		switch {
		case err == nil:
		case ctx.Err() != nil:
		case isNotSupported(err) && len(jobs) > 1:
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
		if doc.Steal != nil {
			fmt.Fprintln(stdout, doc.Steal)
		}
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
