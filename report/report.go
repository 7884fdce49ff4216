// Package report holds the one result schema that every `--json` output of
// mmlab uses, and the small statistics the experiments' tables share.
//
// A document is
//
//	{"schema_version", "experiment", "machine": {"kernel", "cpus", "mem_bytes", "go", ...},
//	 "model_machine": {"name", "features"},
//	 "params", "results": [...], "verdict", "skipped", "interrupted", "point", "steal"}
//
// "machine" is the host that produced the document: live results always
// ran there, and its "features" are the host's (machine.Host()).
// "model_machine" is the machine description the model results ran on
// (mmlab's --machine: "host" or a named description, with its features).
//
// "point", when set, says the document holds one point of a sweep (`mmlab
// all --full --point I`): its index and the sweep's number of points.
// "steal", when set, is what a hypervisor took of each CPU while the live
// target ran (/proc/stat's steal time).
//
// Readers of older documents: a document of version 2 has no
// "model_machine" and no "machine"."features"; read its model results as
// run on the host that produced it ("host"), with the features unknown
// (Document.ModelMachine and Machine.Features are nil). Version 2 added
// schema_version, verdict, skipped and interrupted; a document without
// schema_version is of version 1.
//
// Each result carries "target" ("model" or "live"), "variant" ("before"/"after",
// "srcu"/"tasks-trace", or "kernel" for live), the key fields its experiment
// names, and metrics whose names end in a unit suffix (_ms, _us, _bytes, mops).
// Per-run lists are named <metric>_runs. Every number is a count, a size,
// a time, a rate or a ratio: none is negative but a difference (a float
// field tagged `report:"signed"`), and a count is a whole number (an
// integer field, or a float one tagged `report:"count"`).
//
// Read is the reader: it refuses a document of a newer schema_version, and
// one whose fields do not have the types, the presence or the domain its
// experiment's Document[P, R] gives them, naming the field.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"mmlab/machine"
)

// Machine describes the host where a document was produced.
type Machine struct {
	// Kernel is the OS and the kernel release ("linux 6.18.44"), or the
	// OS alone where the release cannot be read.
	Kernel   string `json:"kernel"`
	CPUs     int    `json:"cpus"`
	MemBytes int64  `json:"mem_bytes"`
	Go       string `json:"go"`
	Hostname string `json:"hostname,omitempty"`
	// HZ and Preempt are the kernel's CONFIG_HZ and preemption model
	// ("none", "voluntary", "full", "lazy"), from /proc/config.gz and the
	// preempt= boot parameter; 0 and "" when they cannot be read.
	HZ      int    `json:"hz,omitempty"`
	Preempt string `json:"preempt,omitempty"`
	// Features are the host's (machine.Host()); nil in documents of
	// version 2, which did not record them.
	Features *machine.Features `json:"features,omitempty"`
}

// ModelMachine is the machine description a document's model results ran
// on: its name ("host" or a named description) and features.
type ModelMachine struct {
	Name     string           `json:"name"`
	Features machine.Features `json:"features"`
}

// ModelLabel says which machine m is, for the report: its name and the
// features it has ("x86-64-pku: ospke, mmap_min_addr 65536,
// CAP_SYS_RAWIO"); for nil, a document of version 2, the host with its
// features not recorded.
func ModelLabel(m *ModelMachine) string {
	if m == nil {
		return "host (features not recorded: schema 2)"
	}
	f := m.Features
	var has []string
	if f.OSPKE {
		has = append(has, "ospke")
	}
	if f.LA57 {
		has = append(has, "la57")
	}
	has = append(has, "mmap_min_addr "+strconv.FormatUint(f.MinAddr(), 10))
	if f.CapSysRawio {
		has = append(has, "CAP_SYS_RAWIO")
	}
	return m.Name + ": " + strings.Join(has, ", ")
}

// SchemaVersion is the version of the common schema that Document writes.
// Version 3 added model_machine and machine.features; version 2 added
// schema_version, verdict, skipped and interrupted.
const SchemaVersion = 3

// Document is the whole `--json` output of one experiment run: P is the
// experiment's typed options, whose JSON is the document's "params", and R
// its typed result, whose JSON carries "target", "variant", its key fields
// and its metrics.
type Document[P, R any] struct {
	SchemaVersion int     `json:"schema_version"`
	Experiment    string  `json:"experiment"`
	Machine       Machine `json:"machine"`
	// ModelMachine is the description the model results ran on; nil in a
	// document of version 2: read it as the host that produced the
	// document, features unknown.
	ModelMachine *ModelMachine `json:"model_machine,omitempty"`
	Params       P             `json:"params"`
	Results      []R           `json:"results"`
	// Verdict is the experiment's one-line judgement, if it has one.
	Verdict string `json:"verdict,omitempty"`
	// Skipped names the targets that could not run here, with the reason.
	Skipped []string `json:"skipped,omitempty"`
	// Interrupted is set when SIGINT or SIGTERM ended the run: Results hold
	// what finished.
	Interrupted bool `json:"interrupted,omitempty"`
	// Point is set when the document holds one point of a sweep.
	Point *SweepPoint `json:"point,omitempty"`
	// Steal is what a hypervisor took of this machine's CPUs while the
	// live target ran; nil if it took nothing, or without a live target.
	Steal *Steal `json:"steal,omitempty"`
}

// Steal is the steal time of the CPUs during a live target's run: time a
// hypervisor ran something else while the CPU had work, which the run's
// figures include and a simulated machine does not have.
type Steal struct {
	RunS float64    `json:"run_s"` // the live target's run, in seconds
	CPUs []CPUSteal `json:"cpus"`  // the CPUs that lost time, in order
}

// CPUSteal is one CPU's steal time during a run.
type CPUSteal struct {
	CPU int     `json:"cpu"`
	MS  float64 `json:"ms"`
}

// StealDuring is the steal of a run of length run from the CPUs' steal
// times before and after it; nil if no CPU's grew.
func StealDuring(before, after map[int]time.Duration, run time.Duration) *Steal {
	s := &Steal{RunS: run.Seconds()}
	for _, cpu := range slices.Sorted(maps.Keys(after)) {
		if d := after[cpu] - before[cpu]; d > 0 {
			s.CPUs = append(s.CPUs, CPUSteal{CPU: cpu, MS: float64(d) / 1e6})
		}
	}
	if len(s.CPUs) == 0 {
		return nil
	}
	return s
}

// String is the line a table prints under it.
func (s *Steal) String() string {
	parts := make([]string, len(s.CPUs))
	for i, c := range s.CPUs {
		parts[i] = fmt.Sprintf("CPU %d %.0f ms (%.1f%%)", c.CPU, c.MS, c.MS/10/s.RunS)
	}
	return fmt.Sprintf("live: the hypervisor took %s of the live run's %.1f s (steal time, /proc/stat)", strings.Join(parts, ", "), s.RunS)
}

// SweepPoint is which point of a sweep a document holds: Index of the sweep's
// Of points, numbered from 0. mmlab report merges the points of a sweep
// into one document in Index order.
type SweepPoint struct {
	Index int `json:"index"`
	Of    int `json:"of"`
}

// NewDocument starts a document for experiment whose model runs on the
// machine model, with the given parameters.
func NewDocument[P, R any](experiment string, model machine.Description, params P) *Document[P, R] {
	return &Document[P, R]{SchemaVersion: SchemaVersion, Experiment: experiment, Machine: ThisMachine(),
		ModelMachine: &ModelMachine{Name: model.Name, Features: model.Features}, Params: params, Results: []R{}}
}

// WriteJSON writes d as indented JSON followed by a newline.
func (d *Document[P, R]) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

// Save writes d as DIR/<experiment>.json, creating DIR.
func (d *Document[P, R]) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, d.Experiment+".json"))
	if err != nil {
		return err
	}
	if err := d.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ThisMachine is machine.Host() as a document records it, with the Go
// version and the hostname, which are not the machine's.
func ThisMachine() Machine {
	return machineOf(machine.Host())
}

// machineOf is ThisMachine of the host description d.
func machineOf(d machine.Description) Machine {
	k := d.Kernel
	m := Machine{Kernel: runtime.GOOS, CPUs: k.CPUs, MemBytes: k.MemBytes, Go: runtime.Version(), HZ: k.HZ, Preempt: k.Preempt, Features: &d.Features}
	if k.Release != "" && k.Release != runtime.GOOS {
		m.Kernel = runtime.GOOS + " " + k.Release
	}
	m.Hostname, _ = os.Hostname()
	return m
}

// Median returns the median of xs (the lower middle value for an even count,
// as the experiments' tables report it), or NaN for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// MeanStddev returns the mean and the sample standard deviation of xs.
func MeanStddev(xs []float64) (mean, stddev float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(xs)-1))
}

// PairRatios returns the mean and the sample standard deviation of
// a[i]/b[i] over the pairs both series have, b[i] > 0 and a[i] a number:
// the ratio of two series sampled in turn, pair by pair.
func PairRatios(a, b []float64) (mean, stddev float64) {
	var rs []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 && !math.IsNaN(a[i]) {
			rs = append(rs, a[i]/b[i])
		}
	}
	return MeanStddev(rs)
}

// Max returns the largest of xs, or NaN for none.
func Max(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return slices.Max(xs)
}
