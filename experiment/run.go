package experiment

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"mmlab/report"
)

// Experiment is the command line's handle on one experiment: its definition
// paired with its live runner by Bind.
type Experiment interface {
	Name() string
	Seed() string
	Summary() string
	// QuickArgs are the arguments of its step in `mmlab all`.
	QuickArgs() []string
	// Main runs `mmlab run NAME args...`: parse and validate, run the jobs,
	// print the table (or the JSON document) and the verdict, and return the
	// exit status.
	Main(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// NotSupported is implemented by the live side's "cannot run here" error
// (mmlab/live.ErrNotSupported): a live job that fails with it is skipped
// with its reason when the user asked for both targets.
type NotSupported interface{ NotSupported() bool }

func isNotSupported(err error) bool {
	var ns NotSupported
	return errors.As(err, &ns) && ns.NotSupported()
}

// Bind pairs a definition with its live runner (nil: the experiment has no
// live side).
func Bind[O Options, R Result](d Def[O, R], live Runner[O, R]) Experiment {
	return &bound[O, R]{def: d, live: live}
}

type bound[O Options, R Result] struct {
	def  Def[O, R]
	live Runner[O, R]
}

func (b *bound[O, R]) Name() string        { return b.def.Name }
func (b *bound[O, R]) Seed() string        { return b.def.Seed }
func (b *bound[O, R]) Summary() string     { return b.def.Summary }
func (b *bound[O, R]) QuickArgs() []string { return b.def.Quick }

// job is one (target, variants) pair of a run.
type job[O Options, R Result] struct {
	target   Target
	variants []string
	run      Runner[O, R]
}

func (b *bound[O, R]) Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	name := b.def.Name
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "mmlab run %s: %s\n", name, fmt.Sprintf(format, a...))
		return code
	}
	o := b.def.NewOptions()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	target := fs.String("target", "both", "model, live or both")
	variant := fs.String("variant", "", "model variants, comma-separated: "+strings.Join(b.def.Variants, ", ")+" (default: all)")
	asJSON := fs.Bool("json", false, "print one JSON document in the common schema instead of the table")
	out := fs.String("out", "", "also save the JSON document as DIR/"+name+".json")
	o.Flags(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), b.def.Help)
		fmt.Fprintln(fs.Output())
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nexit status: 0 ran and judged, 1 a check failed or a part asked for could not run, 2 bad usage, 130 interrupted\n")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	if fs.NArg() > 0 {
		return fail(ExitUsage, "unexpected argument %q (flags come before nothing: mmlab run %s --help)", fs.Arg(0), name)
	}
	if err := OneOf("target", *target, string(Model), string(Live), "both"); err != nil {
		return fail(ExitUsage, "%v", err)
	}
	variants := b.def.Variants
	if *variant != "" {
		var err error
		if variants, err = List("variant", *variant, b.def.Variants...); err != nil {
			return fail(ExitUsage, "%v", err)
		}
	}
	if err := o.Validate(); err != nil {
		return fail(ExitUsage, "%v", err)
	}

	var jobs []job[O, R]
	if *target != string(Live) && b.def.Model != nil {
		jobs = append(jobs, job[O, R]{Model, variants, b.def.Model})
	}
	if *target != string(Model) {
		if b.live == nil {
			if *target == string(Live) {
				return fail(ExitUsage, "--target live: %s has no live side", name)
			}
		} else {
			jobs = append(jobs, job[O, R]{Live, []string{VariantKernel}, b.live})
		}
	}

	doc := report.NewDocument[R](name, params(o))
	status := ExitOK
	for _, j := range jobs {
		if ctx.Err() != nil {
			break
		}
		env := Env{
			Variants: j.variants,
			Progress: func(format string, a ...any) {
				fmt.Fprintf(stderr, "%s %s: %s\n", name, j.target, fmt.Sprintf(format, a...))
			},
			Param: func(key string, value any) { doc.Params[key] = value },
		}
		err := j.run(ctx, o, env, func(r R) { doc.Results = append(doc.Results, r) })
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
		if failed && status == ExitOK {
			status = ExitFailed
		}
	}
	if *out != "" {
		if err := Save(*out, doc); err != nil {
			fmt.Fprintf(stderr, "mmlab run %s: --out: %v\n", name, err)
			status = ExitFailed
		}
	}
	if *asJSON {
		if err := doc.WriteJSON(stdout); err != nil {
			return fail(ExitFailed, "%v", err)
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

// params returns the JSON object of the options, the document's params.
func params(o any) map[string]any {
	m := map[string]any{}
	if b, err := json.Marshal(o); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	return m
}

// Save writes doc as DIR/<experiment>.json, creating DIR.
func Save[R any](dir string, doc *report.Document[R]) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, doc.Experiment+".json"))
	if err != nil {
		return err
	}
	if err := doc.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
