package machine

import (
	"compress/gzip"
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

var hostOnce = sync.OnceValue(func() Description { return readHost("/proc") })

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
