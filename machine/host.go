package machine

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// Host describes the running host, read once per process from /proc:
// cpuinfo's flags (ospke, la57), /proc/sys/vm/mmap_min_addr, CapEff of
// /proc/self/status (CAP_SYS_RAWIO counts only in the initial user
// namespace, which /proc/self/uid_map tells), /proc/config.gz (CONFIG_HZ,
// CONFIG_PREEMPT_*, CONFIG_LSM_MMAP_MIN_ADDR), preempt= of /proc/cmdline,
// the release and the memory size. What it cannot read stays zero: on an
// OS without /proc that is every feature.
func Host() Description { return hostOnce() }

var hostOnce = sync.OnceValue(func() Description {
	d := readHost("/proc")
	d.Kernel.Mitigations = readMitigations("/sys/devices/system/cpu/vulnerabilities")
	return d
})

// capSysRawio is CAP_SYS_RAWIO's bit (include/uapi/linux/capability.h).
const capSysRawio = 17

// readHost reads a Description from the proc tree at root.
func readHost(root string) Description {
	d := Description{Name: "host", Source: "read from " + root + " of this host"}
	read := func(name string) string {
		b, _ := os.ReadFile(root + "/" + name)
		return string(b)
	}
	for line := range strings.Lines(read("cpuinfo")) {
		if rest, ok := strings.CutPrefix(line, "flags"); ok {
			for _, f := range strings.Fields(strings.TrimLeft(rest, "\t :")) {
				switch f {
				case "ospke":
					d.Features.OSPKE = true
				case "la57":
					d.Features.LA57 = true
				}
			}
			break
		}
	}
	d.Features.MmapMinAddr, _ = strconv.ParseUint(strings.TrimSpace(read("sys/vm/mmap_min_addr")), 10, 64)
	for line := range strings.Lines(read("self/status")) {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			capEff, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			d.Features.CapSysRawio = capEff&(1<<capSysRawio) != 0 && initialUserNS(read("self/uid_map"))
		}
	}
	cfg := kernelConfig(root)
	d.Kernel.HZ, _ = strconv.Atoi(cfg["CONFIG_HZ"])
	d.Features.LSMMmapMinAddr, _ = strconv.ParseUint(cfg["CONFIG_LSM_MMAP_MIN_ADDR"], 10, 64)
	for _, m := range []struct{ opt, name string }{
		{"CONFIG_PREEMPT_NONE", "none"}, {"CONFIG_PREEMPT_VOLUNTARY", "voluntary"},
		{"CONFIG_PREEMPT", "full"}, {"CONFIG_PREEMPT_LAZY", "lazy"},
	} {
		if cfg[m.opt] == "y" {
			d.Kernel.Preempt = m.name
		}
	}
	for _, f := range strings.Fields(read("cmdline")) {
		if v, ok := strings.CutPrefix(f, "preempt="); ok {
			d.Kernel.Preempt = v
		}
	}
	d.Kernel.Release = runtime.GOOS
	if r := strings.TrimSpace(read("sys/kernel/osrelease")); r != "" {
		d.Kernel.Release = r
	}
	d.Kernel.CPUs = runtime.NumCPU()
	for line := range strings.Lines(read("meminfo")) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			d.Kernel.MemBytes = kb << 10
		}
	}
	return d
}

// initialUserNS reports whether uid_map is the initial user namespace's
// identity map, "0 0 4294967295": capabilities held in another namespace
// do not pass cap_capable() against init_user_ns.
func initialUserNS(uidMap string) bool {
	f := strings.Fields(uidMap)
	return len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295"
}

// kernelConfig reads root/config.gz into its CONFIG_ options' values; an
// empty map when the kernel does not expose it.
func kernelConfig(root string) map[string]string {
	cfg := map[string]string{}
	f, err := os.Open(root + "/config.gz")
	if err != nil {
		return cfg
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return cfg
	}
	b, _ := io.ReadAll(io.LimitReader(zr, 8<<20))
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && strings.HasPrefix(k, "CONFIG_") {
			cfg[k] = v
		}
	}
	return cfg
}

// syscallMitigations are the files of /sys/devices/system/cpu/vulnerabilities
// whose mitigations run on kernel entry or exit: page-table isolation
// (meltdown), buffer clearing on return (mds, tsa, mmio_stale_data),
// return thunks and RSB filling (retbleed, spec_rstack_overflow,
// spectre_v2, indirect_target_selection).
var syscallMitigations = []string{"meltdown", "spectre_v2", "retbleed", "spec_rstack_overflow", "mds", "tsa", "mmio_stale_data", "indirect_target_selection"}

// readMitigations summarises dir's vulnerability files that bear on a
// syscall's cost, "" when it has none of them.
func readMitigations(dir string) string {
	var parts []string
	for _, name := range syscallMitigations {
		b, err := os.ReadFile(dir + "/" + name)
		if err != nil {
			continue
		}
		parts = append(parts, name+": "+strings.TrimSpace(string(b)))
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + " (" + dir + ")"
}

// ReadTopology reads the CPU topology under sys, the sysfs root ("/sys"):
// each online CPU's package, core and L3 siblings, and the NUMA nodes.
// It also returns each CPU's location, indexed by CPU number, for what
// measures per CPU pair.
func ReadTopology(sys string) (Topology, map[int]CPULocation, error) {
	online, err := os.ReadFile(sys + "/devices/system/cpu/online")
	if err != nil {
		return Topology{}, nil, err
	}
	cpus, err := ParseCPUList(strings.TrimSpace(string(online)))
	if err != nil {
		return Topology{}, nil, fmt.Errorf("%s/devices/system/cpu/online: %w", sys, err)
	}
	locs := map[int]CPULocation{}
	packages, cores, llcs := map[int]bool{}, map[[2]int]bool{}, map[string]bool{}
	for _, c := range cpus {
		dir := fmt.Sprintf("%s/devices/system/cpu/cpu%d/", sys, c)
		num := func(name string) int {
			b, _ := os.ReadFile(dir + name)
			n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			return n
		}
		llc, _ := os.ReadFile(dir + "cache/index3/shared_cpu_list")
		l := CPULocation{Package: num("topology/physical_package_id"), Core: num("topology/core_id"), LLC: strings.TrimSpace(string(llc))}
		if l.LLC == "" {
			l.LLC = fmt.Sprintf("package %d", l.Package)
		}
		locs[c] = l
		packages[l.Package], cores[[2]int{l.Package, l.Core}], llcs[l.LLC] = true, true, true
	}
	t := Topology{Sockets: len(packages), NUMANodes: 1, Source: "read from " + sys + "/devices/system/cpu and " + sys + "/devices/system/node of this host"}
	t.CoresPerSocket = len(cores) / t.Sockets
	t.ThreadsPerCore = len(cpus) / len(cores)
	t.CoresPerLLC = len(cores) / len(llcs)
	t.CPUs = t.Sockets * t.CoresPerSocket * t.ThreadsPerCore
	// Two sockets numbered alternately put CPU 1 on another package than
	// CPU 0; otherwise Place's socket-major order is taken (a model choice
	// where the CPUs are not numbered exactly so).
	t.Numbering = NumberSocketMajor
	if l0, l1 := locs[cpus[0]], locs[cpus[min(1, len(cpus)-1)]]; t.Sockets > 1 && l0.Package != l1.Package {
		t.Numbering = NumberInterleaved
	}
	if b, err := os.ReadFile(sys + "/devices/system/node/online"); err == nil {
		if nodes, err := ParseCPUList(strings.TrimSpace(string(b))); err == nil && len(nodes) > 0 {
			t.NUMANodes = len(nodes)
		}
	}
	if t.CPUs != len(cpus) {
		return t, locs, fmt.Errorf("%d online CPUs are not %d sockets × %d cores × %d threads: an uneven topology", len(cpus), t.Sockets, t.CoresPerSocket, t.ThreadsPerCore)
	}
	return t, locs, nil
}

// CPULocation is where one CPU sits: its package, its core in the package,
// and its last-level cache (the L3's shared_cpu_list, or the package where
// there is no L3).
type CPULocation struct {
	Package, Core int
	LLC           string
}

// Distance classes of two CPUs, named as the Costs fields of their line
// hand-off.
const (
	SameCore   = "line_smt"
	SameLLC    = "line_llc"
	SameSocket = "line_socket"
	Remote     = "line_remote"
)

// Distances are the distance classes, nearest first.
var Distances = [...]string{SameCore, SameLLC, SameSocket, Remote}

// Distance is the class of the pair a, b.
func Distance(a, b CPULocation) string {
	return Distances[DistanceIndex(a.Package == b.Package, a.Core == b.Core, a.LLC == b.LLC)]
}

// DistanceIndex is the index in Distances of the class of two CPUs, given
// whether they sit in one package, one core and one last-level cache (the
// core and the cache count only within one package).
func DistanceIndex(samePackage, sameCore, sameLLC bool) int {
	switch {
	case !samePackage:
		return 3 // Remote
	case sameCore:
		return 0 // SameCore
	case sameLLC:
		return 1 // SameLLC
	}
	return 2 // SameSocket
}

// ParseCPUList parses a kernel CPU list ("0-3,8,10-11").
func ParseCPUList(s string) ([]int, error) {
	var cpus []int
	if s == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("CPU list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("CPU list %q: bad range %q", s, part)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// readClock returns the first "cpu MHz" of cpuinfo text in GHz, 0 without
// one.
func readClock(cpuinfo string) float64 {
	for line := range strings.Lines(cpuinfo) {
		if rest, ok := strings.CutPrefix(line, "cpu MHz"); ok {
			mhz, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimLeft(rest, "\t :")), 64)
			if err == nil {
				return mhz / 1000
			}
		}
	}
	return 0
}

// HostClock is this host's clock as /proc/cpuinfo's "cpu MHz" gives it
// (the current frequency of the first CPU; in a VM, what the hypervisor
// reports), 0 where it says none.
func HostClock() float64 {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return readClock(string(b))
}
