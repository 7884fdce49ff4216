// Package machine describes the machine a model runs on: the CPU and kernel
// features that change the address-space rules (protection keys as the
// kernel enabled them, 5-level paging, vm.mmap_min_addr, the caller's
// capabilities), the kernel facts the experiments report (release, HZ,
// preemption model, mitigations, CPUs, memory), and for a simulated machine
// its topology, clock and costs, each figure with its source.
//
// A Description is one value, chosen when a run starts and passed down at
// construction: kernel.NewMachine takes it, mm.New takes its Features. Host
// reads the running host; Named returns one of the committed descriptions
// (named.json), each with its source. Every live-vs-model comparison builds
// the model from Host(), so that the model follows the kernel it is
// compared with. Simulated returns a description with costs: a named one,
// or the host's as `mmlab calibrate` measured it (HostFile).
package machine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Description is a machine: where a run's model thinks it runs. It is not
// kernel.Machine, which is a running model's CPUs and tasks built on one.
type Description struct {
	// Name is "host" for Host(), or the name of a named description.
	Name string `json:"name"`
	// Source says where a named description's figures come from.
	Source   string   `json:"source,omitempty"`
	Features Features `json:"features"`
	Kernel   Kernel   `json:"kernel"`
	// Topology, Clock and Costs are what a simulated machine runs on;
	// zero in Host(), which reads no costs (Simulated gives the host's
	// calibrated ones).
	Topology Topology `json:"topology"`
	Clock    Clock    `json:"clock"`
	Costs    Costs    `json:"costs"`
	// Noise is what takes a CPU from its task besides the priced work;
	// the zero Noise (every named description's) is none.
	Noise Noise `json:"noise,omitzero"`
	// PostIdle is what a CPU pays for having been idle; the zero PostIdle
	// (every named description's) is none.
	PostIdle PostIdle `json:"post_idle,omitzero"`
}

// Features are what the model's address-space rules depend on.
type Features struct {
	// OSPKE is X86_FEATURE_OSPKE: the CPU has protection keys and the
	// kernel enabled them (CR4.PKE), "ospke" in /proc/cpuinfo. "pku"
	// alone (a CPU with keys that the kernel left off, nopku on the
	// command line) does not count: the kernel's pkey code tests OSPKE.
	OSPKE bool `json:"ospke"`
	// LA57 is 5-level paging in use: the kernel clears "la57" from
	// /proc/cpuinfo when it runs 4-level page tables on a CPU that has it.
	LA57 bool `json:"la57"`
	// MmapMinAddr is vm.mmap_min_addr as /proc/sys/vm/mmap_min_addr gives
	// it: security/min_addr.c's dac_mmap_min_addr.
	MmapMinAddr uint64 `json:"mmap_min_addr"`
	// LSMMmapMinAddr is CONFIG_LSM_MMAP_MIN_ADDR (0 without it); the
	// kernel's mmap_min_addr is the larger of the two.
	LSMMmapMinAddr uint64 `json:"lsm_mmap_min_addr,omitempty"`
	// CapSysRawio is CAP_SYS_RAWIO in the caller's effective set (CapEff
	// of /proc/self/status) in the initial user namespace: it lets a
	// fixed mapping go below dac_mmap_min_addr (cap_mmap_addr()).
	CapSysRawio bool `json:"cap_sys_rawio"`
}

// Kernel is the kernel configuration a run reports.
type Kernel struct {
	// Release is the kernel release ("6.18.44"), or the OS's name where
	// it cannot be read.
	Release string `json:"release"`
	// HZ is CONFIG_HZ, 0 when unknown.
	HZ int `json:"hz,omitempty"`
	// Preempt is the preemption model: "none", "voluntary", "full" or
	// "lazy" (CONFIG_PREEMPT_* or preempt= on the command line), "" when
	// unknown.
	Preempt  string `json:"preempt,omitempty"`
	CPUs     int    `json:"cpus"`
	MemBytes int64  `json:"mem_bytes,omitempty"`
	// Mitigations are the CPU-vulnerability mitigations in force, as
	// they bear on a syscall's cost (page-table isolation, buffer
	// clearing on return, return thunks), with their source; ""
	// when unknown.
	Mitigations string `json:"mitigations,omitempty"`
}

// MinAddr is the kernel's mmap_min_addr: max(dac_mmap_min_addr,
// CONFIG_LSM_MMAP_MIN_ADDR), as security/min_addr.c:update_mmap_min_addr()
// computes it.
func (f Features) MinAddr() uint64 { return max(f.MmapMinAddr, f.LSMMmapMinAddr) }

// TaskSize is TASK_SIZE_MAX for a 64-bit task: the end of the user address
// space, one guard page below 2^47, or 2^56 with 5-level paging
// (arch/x86/include/asm/page_64.h:task_size_max()).
func (f Features) TaskSize() uint64 {
	if f.LA57 {
		return 1<<56 - 4096
	}
	return 1<<47 - 4096
}

// DefaultMapWindow is DEFAULT_MAP_WINDOW: the 47-bit window where mmap
// places a mapping whose hint does not ask for more, also with 5-level
// paging (arch/x86/kernel/sys_x86_64.c).
const DefaultMapWindow = 1<<47 - 4096

// ErrUnknown is the error of Named for a name it does not know.
var ErrUnknown = errors.New("unknown machine")

// Names lists the names Lookup accepts: "host", then the named descriptions.
func Names() []string {
	names := []string{"host"}
	for _, d := range mustNamed() {
		names = append(names, d.Name)
	}
	return names
}

// Named returns the named description name. "host" is not one of them:
// Lookup reads the host for it.
func Named(name string) (Description, error) {
	named := mustNamed()
	i := slices.IndexFunc(named, func(d Description) bool { return d.Name == name })
	if i < 0 {
		return Description{}, fmt.Errorf("%w %q: known are %s", ErrUnknown, name, strings.Join(Names(), ", "))
	}
	return named[i], nil
}

// mustNamed is the named descriptions of named.json, which a test checks.
func mustNamed() []Description {
	ds, err := namedOnce()
	if err != nil {
		panic(err)
	}
	return ds
}

// MustNamed is Named for the names this package defines; it panics on
// another.
func MustNamed(name string) Description {
	d, err := Named(name)
	if err != nil {
		panic(err)
	}
	return d
}

// Lookup returns Host() for "host" and the named description otherwise.
// Host() has no costs: a simulated machine takes its description from
// Simulated.
func Lookup(name string) (Description, error) {
	if name == "host" {
		return Host(), nil
	}
	return Named(name)
}
