package uprobe

import "time"

// TriggerConfig is one run of the trigger benchmark.
type TriggerConfig struct {
	// Target is the function the producers call (LookupTarget).
	Target string
	// Probed puts a probe on the target's first instruction, a uretprobe
	// if Ret, attached as Mode says (uapi.AttachMulti, uapi.AttachPerf).
	Probed, Ret bool
	Mode        string
	// CPUs is the number of producers, producer i pinned to the i-th CPU
	// this process may run on (wrapping around, as the kernel bench's -a).
	CPUs int
	// Warmup runs before the first sample; then one sample every Interval
	// (default 1 s) for Duration (at least one sample).
	Warmup, Duration, Interval time.Duration
}

// TriggerResult is what a run measured.
type TriggerResult struct {
	// Samples are the hit rates in hits per second, one per interval after
	// the warm-up (calls per second for a case without a probe).
	Samples []float64
	// Calls is the number of calls all producers made; Hits the number of
	// BPF program runs. They are equal for a probed case (checked).
	Calls, Hits uint64
}
