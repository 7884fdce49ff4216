// Package report holds the one result schema that every `--json` output of
// mmlab uses, and the small statistics the experiments' tables share.
//
// A document is
//
//	{"schema_version", "experiment", "machine": {"kernel", "cpus", "mem_bytes", "go", ...},
//	 "params", "results": [...], "verdict", "skipped", "interrupted"}
//
// Each result carries "target" ("model" or "live"), "variant" ("before"/"after",
// "srcu"/"tasks-trace", or "kernel" for live), the key fields its experiment
// names, and metrics whose names end in a unit suffix (_ms, _us, _bytes, mops).
// Per-run lists are named <metric>_runs.
package report

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// Machine describes where a document was produced.
type Machine struct {
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
}

// SchemaVersion is the version of the common schema that Document writes.
// Version 2 added schema_version, verdict, skipped and interrupted.
const SchemaVersion = 2

// Document is the whole `--json` output of one experiment run: R is the
// experiment's typed result, whose JSON carries "target", "variant", its key
// fields and its metrics.
type Document[R any] struct {
	SchemaVersion int            `json:"schema_version"`
	Experiment    string         `json:"experiment"`
	Machine       Machine        `json:"machine"`
	Params        map[string]any `json:"params"`
	Results       []R            `json:"results"`
	// Verdict is the experiment's one-line judgement, if it has one.
	Verdict string `json:"verdict,omitempty"`
	// Skipped names the targets that could not run here, with the reason.
	Skipped []string `json:"skipped,omitempty"`
	// Interrupted is set when SIGINT or SIGTERM ended the run: Results hold
	// what finished.
	Interrupted bool `json:"interrupted,omitempty"`
}

// NewDocument starts a document for experiment with the given parameters.
func NewDocument[R any](experiment string, params map[string]any) *Document[R] {
	if params == nil {
		params = map[string]any{}
	}
	return &Document[R]{SchemaVersion: SchemaVersion, Experiment: experiment, Machine: ThisMachine(), Params: params, Results: []R{}}
}

// WriteJSON writes d as indented JSON followed by a newline.
func (d *Document[R]) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

// Save writes d as DIR/<experiment>.json, creating DIR.
func (d *Document[R]) Save(dir string) error {
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

// ThisMachine reads the kernel release, CPU count and memory size of the
// machine running mmlab. Fields it cannot read stay empty.
func ThisMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), Kernel: runtime.GOOS}
	m.Hostname, _ = os.Hostname()
	m.HZ, m.Preempt = kernelConfig()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = runtime.GOOS + " " + strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			f := strings.Fields(line)
			if len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				m.MemBytes = kb << 10
			}
		}
	}
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

// kernelConfig reads CONFIG_HZ and the preemption model of the running
// kernel: the CONFIG_PREEMPT_* choice of /proc/config.gz, overridden by a
// preempt= boot parameter (CONFIG_PREEMPT_DYNAMIC).
func kernelConfig() (hz int, preempt string) {
	f, err := os.Open("/proc/config.gz")
	if err != nil {
		return 0, ""
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return 0, ""
	}
	b, err := io.ReadAll(io.LimitReader(zr, 8<<20))
	if err != nil {
		return 0, ""
	}
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "CONFIG_HZ="):
			hz, _ = strconv.Atoi(strings.TrimPrefix(line, "CONFIG_HZ="))
		case line == "CONFIG_PREEMPT_NONE=y":
			preempt = "none"
		case line == "CONFIG_PREEMPT_VOLUNTARY=y":
			preempt = "voluntary"
		case line == "CONFIG_PREEMPT=y":
			preempt = "full"
		case line == "CONFIG_PREEMPT_LAZY=y":
			preempt = "lazy"
		}
	}
	if cmd, err := os.ReadFile("/proc/cmdline"); err == nil {
		for _, f := range strings.Fields(string(cmd)) {
			if v, ok := strings.CutPrefix(f, "preempt="); ok {
				preempt = v
			}
		}
	}
	return hz, preempt
}
