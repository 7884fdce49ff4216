package calibrate

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"mmlab/machine"
)

const (
	// noiseBurst is how long one loop reads the clock without a pause: well
	// under the kernel's real-time throttling period and the Go runtime's
	// forced preemption (10 ms), so that neither shows as noise.
	noiseBurst = 2 * time.Millisecond
	// noiseGap is the shortest gap between two clock reads that counts as
	// an interruption: a read takes tens of nanoseconds.
	noiseGap = time.Microsecond
	// noiseKeep caps the durations a description keeps.
	noiseKeep = 1000
)

// Noise measures what interrupts a task on each of cpus, as the kernel's
// osnoise tracer does: on every CPU at once, a thread pinned there at
// SCHED_FIFO reads CLOCK_MONOTONIC in a loop for bursts of noiseBurst
// (500 of them at Scale 1, a millisecond's sleep after each), and every gap
// over noiseGap between two reads is an interruption: an interrupt, or on
// a virtual machine the host's own work. The rate is per second of the
// loops' busy time; the durations kept are at most noiseKeep, evenly
// spaced in order (the longest among them). It returns the noise without
// its source, and what it timed.
func Noise(ctx context.Context, o Options, cpus []int) (machine.Noise, string, error) {
	bursts := max(int(500*o.Scale), 1)
	type result struct {
		gaps []float64
		busy time.Duration
		err  error
	}
	results := make(chan result, len(cpus))
	for _, cpu := range cpus {
		go func() {
			runtime.LockOSThread() // exits with the goroutine: its affinity and policy go with it
			var r result
			defer func() { results <- r }()
			if r.err = pin(cpu); r.err != nil {
				return
			}
			r.gaps = make([]float64, 0, 64*bursts)
			for range bursts {
				if r.err = ctx.Err(); r.err != nil {
					return
				}
				start := time.Now()
				prev := start
				for prev.Sub(start) < noiseBurst {
					t := time.Now()
					if d := t.Sub(prev); d > noiseGap {
						r.gaps = append(r.gaps, float64(d))
					}
					prev = t
				}
				r.busy += prev.Sub(start)
				time.Sleep(time.Millisecond)
			}
		}()
	}
	var gaps []float64
	var busy time.Duration
	var err error
	for range cpus {
		r := <-results
		if r.err != nil && err == nil {
			err = r.err
		}
		gaps = append(gaps, r.gaps...)
		busy += r.busy
	}
	if err != nil {
		return machine.Noise{}, "", err
	}
	slices.Sort(gaps)
	var stolen float64
	for _, g := range gaps {
		stolen += g
	}
	n := machine.Noise{PerSecond: float64(len(gaps)) / busy.Seconds(), NS: keepSpaced(gaps, noiseKeep)}
	what := fmt.Sprintf("gaps over %v between two reads of CLOCK_MONOTONIC in loops pinned to CPUs %v at SCHED_FIFO %d, all at once, %d bursts of %v each (%.2f s busy in all): %d gaps, %.2f%% of the busy time",
		noiseGap, cpus, fifoPriority, bursts, noiseBurst, busy.Seconds(), len(gaps), 100*stolen/float64(busy))
	if len(gaps) == 0 {
		n = machine.Noise{} // nothing interrupted the loops
	}
	return n, what, nil
}

// keepSpaced returns at most k of the sorted values v, evenly spaced in
// order, the first and the last among them.
func keepSpaced(v []float64, k int) []float64 {
	if len(v) <= k {
		return v
	}
	out := make([]float64, k)
	for i := range out {
		out[i] = v[i*(len(v)-1)/(k-1)]
	}
	return out
}
