package uprobe

import (
	"fmt"
	"time"
)

// The cases of the trigger benchmark, named as the kernel's `bench trig-*`.
const (
	CaseNop          = "nop"           // no probe: the producer loop's own speed
	CaseUprobeNop    = "uprobe-nop"    // uprobe on a nop (emulated)
	CaseUretprobeNop = "uretprobe-nop" // uretprobe on the nop function
	CaseUprobeRet    = "uprobe-ret"    // uprobe on a ret (single-stepped or emulated)
	CaseUprobeNop5   = "uprobe-nop5"   // uprobe on a 5-byte nop (x86 may optimize it)
)

// Cases are the trigger cases the experiment runs by default, in order.
var Cases = []string{CaseNop, CaseUprobeNop, CaseUretprobeNop, CaseUprobeRet}

// AllCases adds the optional ones.
var AllCases = append(append([]string(nil), Cases...), CaseUprobeNop5)

// caseTarget maps a case to the target it calls and the probe on it.
func caseTarget(c string) (target string, probed, ret bool, err error) {
	switch c {
	case CaseNop:
		return "nop", false, false, nil
	case CaseUprobeNop:
		return "nop", true, false, nil
	case CaseUretprobeNop:
		return "nop", true, true, nil
	case CaseUprobeRet:
		return "ret", true, false, nil
	case CaseUprobeNop5:
		return "nop5", true, false, nil
	}
	return "", false, false, fmt.Errorf("unknown trigger case %q (want one of %v)", c, AllCases)
}

// TriggerConfig is one run of the trigger benchmark.
type TriggerConfig struct {
	Case string
	Mode Mode // how the probe is attached; ignored for CaseNop
	// CPUs is the number of producers, producer i pinned to the i-th CPU
	// this process may run on (wrapping around, as the kernel bench's -a).
	CPUs int
	// Warmup runs before the first sample (default 1 s); then one sample
	// every Interval (default 1 s) for Duration (at least one sample).
	Warmup, Duration, Interval time.Duration
}

// TriggerResult is what a run measured.
type TriggerResult struct {
	// Samples are the hit rates in hits per second, one per interval after
	// the warm-up (calls per second for CaseNop).
	Samples []float64
	// Calls is the number of calls all producers made; Hits the number of
	// BPF program runs. They are equal for a probed case (checked).
	Calls, Hits uint64
}

// FormatTrigger prints one summary line exactly as the kernel's trigger
// benchmark sweep does (seed 004):
//
//	uprobe-nop ( 1 cpus): 3.396 ± 0.002M/s ( 3.396M/s/cpu)
//
// mean and stddev are in hits per second.
func FormatTrigger(name string, cpus int, mean, stddev float64) string {
	return fmt.Sprintf("%s (%2d cpus): %.3f ± %.3fM/s (%6.3fM/s/cpu)", name, cpus, mean/1e6, stddev/1e6, mean/1e6/float64(cpus))
}
