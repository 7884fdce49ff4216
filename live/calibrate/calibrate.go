// Package calibrate measures this host's primitives, the costs a simulated
// machine charges, and writes them as the host's machine description:
// a syscall round trip, a context switch and a cross-CPU wake-up through a
// pipe, an IPI, an anonymous page fault, populating a page, a cache line's
// hand-off between each class of CPU pair, an uncontended locked
// read-modify-write, a fork of a minimal process, without and with
// present pages (live.ForkHelperELF), openat(2) and close(2) of /dev/null,
// the declared point that the cost of a kernel instruction is fitted to
// (machine.Costs.KernelInstruction), and openat(2) alone back to back and
// right after idles of 50 µs to 16 ms, what a CPU pays for having been
// idle (machine.PostIdle). It never measures a uprobe, a maps
// scan or any experiment's own figure: those are what a simulated run is
// compared with.
//
// Each measurement is repeated (Options.Runs) and kept whole in the
// calibration file; a cost is the median of its runs. The int3 trap is not
// measured: a breakpoint in Go code raises a SIGTRAP that the Go runtime
// treats as a crash (its signal table gives SIGTRAP no _SigNotify, and
// without cgo no other handler can run), so its cost is the measured
// syscall plus the published int3-versus-syscall delta (Int3Delta).
//
// What a run creates and how it goes: pinned OS threads, which exit with
// their goroutine (each is locked and never unlocked); pipes and anonymous
// mappings, closed and unmapped before each measurement returns; the fork
// helper, in a directory of the run removed when its measurement returns
// (and by the next mmlab run if this one was killed), and its children,
// reaped; the
// output file, written under a temporary name and renamed into place only
// when every measurement finished, so that an interrupted run leaves
// nothing.
package calibrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"mmlab/machine"
)

// Options say how much calibrate measures.
type Options struct {
	// Runs is how many times each measurement repeats.
	Runs int
	// Scale multiplies each run's operation count (1 for calibrate;
	// tests run smaller).
	Scale float64
	// PairsPerClass caps the CPU pairs measured per distance class.
	PairsPerClass int
	// Progress receives one line per measurement.
	Progress func(format string, args ...any)
}

// DefaultOptions are calibrate's.
func DefaultOptions() Options {
	return Options{Runs: 11, Scale: 1, PairsPerClass: 4, Progress: func(string, ...any) {}}
}

func (o Options) count(n int) int { return max(1, int(float64(n)*o.Scale)) }

// Int3Delta returns the published int3+IRET minus syscall+SYSRET delta for
// a CPU of this vendor (cpuinfo's vendor_id), in nanoseconds, with its
// source. Both are derived from Jiri Olsa's "uprobe: Add uretprobe syscall
// to speed up return probe" cover letter (research/machines.md 2.1): the
// uretprobe trampoline's int3 replaced by a syscall. The delta is a
// single-CPU hardware cost, not a uprobe's hit time (machines.md 2.6).
func Int3Delta(vendor string) (float64, string) {
	if vendor == "AuthenticAMD" {
		return 122, "122 ns on an AMD Ryzen 7 5700U (Zen 2; uretprobe-nop 1285 -> 1163 ns)"
	}
	return 164, "164 ns on an Intel i7-1165G7 (uretprobe-nop 672 -> 508 ns)"
}

// Summarize makes a Measurement of runs' figures.
func Summarize(name, what string, ns []float64) machine.Measurement {
	s := slices.Clone(ns)
	slices.Sort(s)
	m := machine.Measurement{Name: name, What: what, NS: ns}
	if len(s) > 0 {
		m.Median, m.Min, m.Max = median(s), s[0], s[len(s)-1]
	}
	return m
}

// median of sorted s: the middle value, or the mean of the two middle ones.
func median(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Spread is a measurement's spread: (max-min)/median.
func Spread(m machine.Measurement) float64 {
	if m.Median == 0 {
		return math.NaN()
	}
	return (m.Max - m.Min) / m.Median
}

// repeat runs f runs times, checking ctx before each.
func repeat(ctx context.Context, runs int, f func() (float64, error)) ([]float64, error) {
	var ns []float64
	for range runs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		v, err := f()
		if err != nil {
			return nil, err
		}
		ns = append(ns, v)
	}
	return ns, nil
}

// perOp is the nanoseconds per operation of n operations that took d.
func perOp(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / float64(n) }

// Write writes c to path atomically: a temporary file in path's directory
// (created), renamed to path when complete.
func Write(path string, c machine.Calibration) error {
	b, err := c.Marshal()
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".host-*.json")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	err = errors.Join(err, f.Chmod(0o644), f.Close())
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Pairs chooses the CPU pairs to measure a line's hand-off on: per
// distance class, up to perClass pairs of the allowed CPUs, the first
// found in CPU order.
func Pairs(cpus []int, locs map[int]machine.CPULocation, perClass int) map[string][][2]int {
	pairs := map[string][][2]int{}
	for i, a := range cpus {
		for _, b := range cpus[i+1:] {
			la, oka := locs[a]
			lb, okb := locs[b]
			if !oka || !okb {
				continue
			}
			class := machine.Distance(la, lb)
			if len(pairs[class]) < perClass {
				pairs[class] = append(pairs[class], [2]int{a, b})
			}
		}
	}
	return pairs
}
