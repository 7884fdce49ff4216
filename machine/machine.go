// Package machine describes the machine a model runs on: the CPU and kernel
// features that change the address-space rules (protection keys as the
// kernel enabled them, 5-level paging, vm.mmap_min_addr, the caller's
// capabilities) and the kernel facts the experiments report (release, HZ,
// preemption model, CPUs, memory).
//
// A Description is one value, chosen when a run starts and passed down at
// construction: kernel.NewMachine takes it, mm.New takes its Features. Host
// reads the running host; Named returns one of the committed descriptions,
// each with its source. Every live-vs-model comparison builds the model from
// Host(), so that the model follows the kernel it is compared with.
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

// Named descriptions. Their features are those of a distribution kernel
// run as root on a bare host; Source says which.
var named = []Description{
	{
		Name:     "x86-64",
		Source:   "an x86-64 CPU without protection keys (before Intel Skylake-SP or AMD Zen 3) under a Debian kernel (its amd64 configuration: CONFIG_DEFAULT_MMAP_MIN_ADDR=65536, CONFIG_LSM_MMAP_MIN_ADDR=65536, CONFIG_HZ=250, CONFIG_PREEMPT_VOLUNTARY), 4-level paging, run as root with CAP_SYS_RAWIO; 2 CPUs",
		Features: Features{MmapMinAddr: 65536, LSMMmapMinAddr: 65536, CapSysRawio: true},
		Kernel:   Kernel{Release: "6.18", HZ: 250, Preempt: "voluntary", CPUs: 2},
	},
	{
		Name:     "x86-64-pku",
		Source:   "as x86-64, on a CPU whose protection keys the kernel enabled (ospke: Intel Skylake-SP and later, AMD Zen 3 and later)",
		Features: Features{OSPKE: true, MmapMinAddr: 65536, LSMMmapMinAddr: 65536, CapSysRawio: true},
		Kernel:   Kernel{Release: "6.18", HZ: 250, Preempt: "voluntary", CPUs: 2},
	},
	{
		Name:     "x86-64-la57",
		Source:   "as x86-64-pku, with 5-level paging (Intel Ice Lake-SP and later, AMD Zen 4 and later, booted without no5lvl)",
		Features: Features{OSPKE: true, LA57: true, MmapMinAddr: 65536, LSMMmapMinAddr: 65536, CapSysRawio: true},
		Kernel:   Kernel{Release: "6.18", HZ: 250, Preempt: "voluntary", CPUs: 2},
	},
}

// Names lists the names Lookup accepts: "host", then the named descriptions.
func Names() []string {
	names := []string{"host"}
	for _, d := range named {
		names = append(names, d.Name)
	}
	return names
}

// Named returns the named description name. "host" is not one of them:
// Lookup reads the host for it.
func Named(name string) (Description, error) {
	i := slices.IndexFunc(named, func(d Description) bool { return d.Name == name })
	if i < 0 {
		return Description{}, fmt.Errorf("%w %q: known are %s", ErrUnknown, name, strings.Join(Names(), ", "))
	}
	return named[i], nil
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
func Lookup(name string) (Description, error) {
	if name == "host" {
		return Host(), nil
	}
	return Named(name)
}
