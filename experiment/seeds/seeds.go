// Package seeds is what `mmlab all` and `mmlab report` know of the three
// patch series mmlab reproduces: for each seed, its published figures
// (carried as data in published.json, with where they come from), the
// experiments that reproduce it in the quick and the full setting, and the
// section of the report built from their saved documents: the seed's table
// with the published, model and live columns side by side, charts, and the
// verdict line a user acts on.
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

// Section builds the seed's section from docs.
func (s *Seed) Section(docs Docs) report.Seed { return s.section(s, docs) }

// Docs are saved documents by experiment name: the raw JSON of each.
type Docs map[string][]byte

// simDocName is the key in Docs of experiment name's sim document (the
// seed's table on the seed's machine).
func simDocName(name string) string { return "sim/" + name }

// ReadDocs reads every <experiment>.json in dir.
func ReadDocs(dir string) (Docs, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
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
		docs[head.Experiment] = b
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

// PlannedStep is one experiment of a run of `mmlab all`.
type PlannedStep struct {
	Seed       *Seed
	Experiment string
	Args       []string
	Est        time.Duration
}

// Settings of `mmlab all`.
const (
	Quick = "quick"
	Full  = "full"
	Smoke = "smoke"
)

// Plan lists the steps of every seed in a setting.
func Plan(seeds []*Seed, setting string) []PlannedStep {
	var plan []PlannedStep
	for _, s := range seeds {
		for _, st := range s.Steps {
			p := PlannedStep{Seed: s, Experiment: st.Experiment, Args: st.Quick, Est: st.EstQuick}
			switch setting {
			case Full:
				p.Args, p.Est = st.Full, st.EstFull
			case Smoke:
				p.Args, p.Est = st.Smoke, st.EstQuick/10
			}
			plan = append(plan, p)
		}
	}
	return plan
}
