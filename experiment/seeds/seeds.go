// Package seeds is what `mmlab all` and `mmlab report` know of the three
// patch series mmlab reproduces: for each seed, its published figures
// (carried as data in published.json, with where they come from), the
// experiments that reproduce it in the quick and the full setting, and the
// section of the report built from their saved documents: the seed's table
// with the published, model and live columns side by side, charts, and the
// verdict line a user acts on.
//
// A results directory DIR of `mmlab all` holds one document per
// experiment, DIR/<experiment>.json, of its model and live step, and one
// per sim step, DIR/sim/<experiment>.json (--target sim on the step's
// machine). Docs keys the first by the experiment's name and the second by
// SimKey(name), "sim/<experiment>": a section asks for the sim document of
// an experiment with docs[SimKey(name)].
package seeds

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"mmlab/experiment"
	"mmlab/report"
)

//go:embed published.json
var publishedJSON []byte

// Published is a seed's own account of itself: the series and its figures.
type Published struct {
	Title   string `json:"title"`
	Author  string `json:"author"`
	Date    string `json:"date"`
	Status  string `json:"status"`
	Summary string `json:"summary"`
	Source  string `json:"source"`
	Setting string `json:"setting"`
	// The figures, one list per experiment that reproduces them.
	Forkstall []PubFork    `json:"forkstall,omitempty"`
	Mapscan   *PubMapscan  `json:"mapscan,omitempty"`
	Trigger   []PubTrigger `json:"trigger,omitempty"`
}

// PubFork is one row of seed 000's table.
type PubFork struct {
	Case, Mode                    string
	ForkBeforeMs, ForkAfterMs     float64
	AttachBeforeMs, AttachAfterMs float64
}

func (p *PubFork) UnmarshalJSON(b []byte) error {
	var raw struct {
		Case           string  `json:"case"`
		Mode           string  `json:"mode"`
		ForkBeforeMs   float64 `json:"fork_before_ms"`
		ForkAfterMs    float64 `json:"fork_after_ms"`
		AttachBeforeMs float64 `json:"attach_before_ms"`
		AttachAfterMs  float64 `json:"attach_after_ms"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*p = PubFork{raw.Case, raw.Mode, raw.ForkBeforeMs, raw.ForkAfterMs, raw.AttachBeforeMs, raw.AttachAfterMs}
	return nil
}

// PubLatency is one design's mapper latencies in seed 003's raw data, ms:
// the median of the per-run means, the range of the means and of the
// maxima over the runs.
type PubLatency struct {
	MedianMean float64 `json:"median_mean_ms"`
	MeanLo     float64 `json:"mean_lo_ms"`
	MeanHi     float64 `json:"mean_hi_ms"`
	MaxLo      float64 `json:"max_lo_ms"`
	MaxHi      float64 `json:"max_hi_ms"`
	// Samples is --nsamples; MaxSmallest and MaxLargest are the
	// per-sample maxima the cover letter prints, the four smallest and
	// the four largest, in increasing order.
	Samples     int       `json:"samples"`
	MaxSmallest []float64 `json:"max_smallest_ms"`
	MaxLargest  []float64 `json:"max_largest_ms"`
}

// PubMapscan is seed 003's before and after.
type PubMapscan struct {
	Before PubLatency `json:"before"`
	After  PubLatency `json:"after"`
}

// PubTrigger is one row of seed 004's figures, M hits/s.
type PubTrigger struct {
	Case       string  `json:"case"`
	CPUs       int     `json:"cpus"`
	SRCU       float64 `json:"srcu_mops"`
	TasksTrace float64 `json:"tasks_trace_mops"`
}

// Step is one experiment run for a seed by `mmlab all`, with the
// arguments its definition gives each setting.
type Step struct {
	Experiment string
	experiment.Settings
	// read checks a document of the experiment (report.Read with its
	// types): `mmlab report` reads the experiments of the seeds' steps.
	read func(b []byte) error
}

// step is the step of the experiment d.
func step[O experiment.Options, R experiment.Result](d experiment.Def[O, R]) Step {
	return StepOf(d)
}

// StepOf is the step of the experiment d, with its settings, which a
// caller may change (as a test gives an experiment a sim step).
func StepOf[O experiment.Options, R experiment.Result](d experiment.Def[O, R]) Step {
	return Step{d.Name, d.Settings(), read[O, R]}
}

// read checks the document b against the params P and the results R.
func read[P, R any](b []byte) error {
	_, err := report.Read[P, R](b)
	return err
}

// Seed is one patch series.
type Seed struct {
	ID        string
	Published Published
	Steps     []Step
	// section builds the seed's part of the report from the saved
	// documents of its steps (missing ones are said to be missing).
	section func(s *Seed, docs Docs) report.Seed
}

// Section builds the seed's section from docs. A Seed built without a
// section function (as a test builds one) has a section of its ID alone.
func (s *Seed) Section(docs Docs) report.Seed {
	if s.section == nil {
		return report.Seed{ID: s.ID, Title: s.Published.Title}
	}
	return s.section(s, docs)
}

// Docs are saved documents, the raw JSON of each, by experiment name for
// the model and live documents and by SimKey(name) for the sim ones.
type Docs map[string][]byte

// SimDir is the subdirectory of a results directory that holds the sim
// steps' documents and logs.
const SimDir = "sim"

// SimKey is the key in Docs of the sim document of experiment name, the one
// saved in DIR/sim: "sim/" and the name.
func SimKey(name string) string { return SimDir + "/" + name }

// docKey is the key in Docs of the document of experiment exp saved in the
// file path: SimKey(exp) in a directory named SimDir, else exp.
func docKey(path, exp string) string {
	if filepath.Base(filepath.Dir(path)) == SimDir {
		return SimKey(exp)
	}
	return exp
}

// docFiles lists the documents of the results directory dir: dir/*.json
// and dir/sim/*.json.
func docFiles(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sim, err := filepath.Glob(filepath.Join(dir, SimDir, "*.json"))
	return append(files, sim...), err
}

// ReadDocs reads every <experiment>.json in dir and in dir/sim, keyed as
// Docs says.
func ReadDocs(dir string) (Docs, error) {
	files, err := docFiles(dir)
	if err != nil {
		return nil, err
	}
	docs := Docs{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var head struct {
			Experiment string `json:"experiment"`
		}
		if json.Unmarshal(b, &head) != nil || head.Experiment == "" {
			continue // not a document of ours
		}
		docs[docKey(f, head.Experiment)] = b
	}
	return docs, nil
}

// decode reads the document of experiment name into doc; false when it is
// missing or unreadable.
func decode[P, R any](docs Docs, name string, doc *report.Document[P, R]) bool {
	b, ok := docs[name]
	return ok && json.Unmarshal(b, doc) == nil
}

// addPart decodes the document of experiment name and, when there is one,
// adds the part build makes of it to sec. It returns the document (nil
// when it is missing) and build's line.
func addPart[P, R any](sec *report.Seed, docs Docs, name string, build func(*report.Document[P, R]) (report.Part, string)) (*report.Document[P, R], string) {
	var doc report.Document[P, R]
	if !decode(docs, name, &doc) {
		return nil, ""
	}
	part, line := build(&doc)
	sec.Parts = append(sec.Parts, part)
	return &doc, line
}

// All returns the seeds in order.
func All() []*Seed {
	var pub map[string]Published
	if err := json.Unmarshal(publishedJSON, &pub); err != nil {
		panic("seeds: published.json: " + err.Error())
	}
	seeds := []*Seed{seed000(), seed003(), seed004()}
	for _, s := range seeds {
		s.Published = pub[s.ID]
	}
	return seeds
}

// Header is the seed's heading line.
func (s *Seed) Header() string {
	p := s.Published
	return fmt.Sprintf("seed %s: %s (%s, %s; %s)", s.ID, p.Title, p.Author, p.Date, p.Status)
}

// settingLine says what a live column ran on.
func settingLine(m report.Machine, extra string) string {
	parts := []string{strings.TrimPrefix(m.Kernel, "linux "), fmt.Sprintf("%d CPUs", m.CPUs)}
	if m.HZ != 0 {
		parts = append(parts, fmt.Sprintf("HZ=%d", m.HZ))
	}
	if m.Preempt != "" {
		parts = append(parts, "preempt "+m.Preempt)
	}
	if extra != "" {
		parts = append(parts, extra)
	}
	return strings.Join(parts, ", ")
}

// PlannedStep is one experiment run of `mmlab all`: a model and live
// step, or a sim step (Machine set) on the machine of its seed.
type PlannedStep struct {
	Seed       *Seed
	Experiment string
	// Args are the experiment's arguments in the setting, without
	// --target, --machine and --out (RunArgs adds them).
	Args []string
	Est  time.Duration
	// Machine is a sim step's named machine description; "" for a model
	// and live step.
	Machine string
	// Point is set for one point of the full setting's sim sweep (Points).
	Point *report.SweepPoint
}

// IsSim reports whether p is a sim step.
func (p PlannedStep) IsSim() bool { return p.Machine != "" }

// Dir is the directory of the step's document and log in the results
// directory dir: dir for a model and live step, dir/sim for a sim step.
func (p PlannedStep) Dir(dir string) string {
	if p.IsSim() {
		return filepath.Join(dir, SimDir)
	}
	return dir
}

// RunArgs are the arguments of `mmlab run EXPERIMENT` for the step, saving
// its document in p.Dir(dir): a model and live step runs on target and
// machine (mmlab all's --target and --machine), a sim step on --target sim
// and its own machine, and a point says which it is (--sweep-point I/N).
func (p PlannedStep) RunArgs(target, machine, dir string) []string {
	args := append([]string{}, p.Args...)
	if p.IsSim() {
		target, machine = string(experiment.Sim), p.Machine
	}
	args = append(args, "--target", target, "--machine", machine, "--out", p.Dir(dir))
	if p.Point != nil {
		args = append(args, "--sweep-point", fmt.Sprintf("%d/%d", p.Point.Index, p.Point.Of))
	}
	return args
}

// Label names the step in progress lines: the experiment, for a sim step
// with its machine, for a point with its index.
func (p PlannedStep) Label() string {
	l := p.Experiment
	if p.IsSim() {
		l += " (sim, " + p.Machine
		if p.Point != nil {
			l += fmt.Sprintf(", point %d of %d", p.Point.Index, p.Point.Of)
		}
		l += ")"
	}
	return l
}

// Settings of `mmlab all`.
const (
	Quick = "quick"
	Full  = "full"
	Smoke = "smoke"
)

// Plan lists the steps of every seed in a setting: each experiment's model
// and live step and, when its settings have one, its sim step right after.
func Plan(seeds []*Seed, setting string) []PlannedStep {
	var plan []PlannedStep
	for _, s := range seeds {
		for _, st := range s.Steps {
			p := PlannedStep{Seed: s, Experiment: st.Experiment}
			p.Args, p.Est = inSetting(setting, st.Quick, st.Full, st.Smoke, st.EstQuick, st.EstFull)
			plan = append(plan, p)
			if sim := st.Sim; sim != nil {
				p := PlannedStep{Seed: s, Experiment: st.Experiment, Machine: sim.Machine}
				p.Args, p.Est = inSetting(setting, sim.Quick, sim.Full, sim.Smoke, sim.EstQuick, sim.EstFull)
				plan = append(plan, p)
			}
		}
	}
	return plan
}

// inSetting picks a step's arguments and estimate in setting from its
// quick, full and smoke arguments and its quick and full estimates: a
// smoke run is estimated at a tenth of the quick one.
func inSetting(setting string, quick, full, smoke []string, estQuick, estFull time.Duration) ([]string, time.Duration) {
	switch setting {
	case Full:
		return full, estFull
	case Smoke:
		return smoke, estQuick / 10
	}
	return quick, estQuick
}

// Points lists the points of the full setting's sim sweep, the steps of
// `mmlab all --full --point I` by index I: for each sim step in Plan's
// order, its Points, or its Full arguments as one point. A point's
// estimate is its step's EstFull shared out evenly.
func Points(seeds []*Seed) []PlannedStep {
	var points []PlannedStep
	for _, s := range seeds {
		for _, st := range s.Steps {
			sim := st.Sim
			if sim == nil {
				continue
			}
			args := sim.Points
			if args == nil {
				args = [][]string{sim.Full}
			}
			for i, a := range args {
				points = append(points, PlannedStep{Seed: s, Experiment: st.Experiment, Args: a,
					Est: sim.EstFull / time.Duration(len(args)), Machine: sim.Machine,
					Point: &report.SweepPoint{Index: i, Of: len(args)}})
			}
		}
	}
	return points
}
