package uprobe

// Red-zone sites: where RedZone puts the probe in the red-zone target.
const (
	RedZoneNone = ""     // no probe
	RedZoneNop  = "nop"  // the one-byte nop: an int3 at every hit, never optimized
	RedZoneNop5 = "nop5" // the 5-byte nop, which x86-64 optimizes since v6.18
)

// RedZoneConfig is one live run of the red-zone target
// (cpu.RedZoneTarget).
type RedZoneConfig struct {
	Site string // RedZoneNone, RedZoneNop or RedZoneNop5
	Mode string // how the probe is attached (uapi.AttachMulti, uapi.AttachPerf)
	// Calls per sample (at least 1), Samples at least 1.
	Calls   uint64
	Samples int
}

// RedZoneResult is what a run of the red-zone target found.
type RedZoneResult struct {
	// Samples are the calls per second of each sample (hits per second
	// with a probe: every call is a hit, checked).
	Samples []float64
	// CPUSamples are the same per CPU-second of the calling thread (user
	// and system: the kernel's part of a hit counts).
	CPUSamples []float64
	Calls      uint64
	Hits       uint64 // BPF program runs
	// Corrupted is the number of calls that found a red-zone word
	// changed, Mask the union of the words' bits (bit i: -8*(i+1)(%rsp)).
	Corrupted, Mask uint64
}
