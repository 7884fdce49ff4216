package uprobe

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"mmlab/cpu"
	"mmlab/host"
	"mmlab/uapi"
)

// HasOptimizedUprobes reports whether the kernel has the uprobe syscall,
// that is x86-64 optimized uprobes (v6.18+): from ordinary code the call
// fails with ENXIO, on an older kernel with ENOSYS.
func HasOptimizedUprobes() bool {
	if !haveTargets {
		return false // the number is x86-64's
	}
	_, _, e := unix.Syscall(uapi.NrUprobe, 0, 0, 0)
	return e != unix.ENOSYS
}

// RedZone calls the red-zone target cfg.Samples times cfg.Calls times on
// one locked OS thread, with a probe attached at cfg.Site for this process
// (none for RedZoneNone), and reports which of its red-zone words the calls
// found changed. The probe is attached before the first call, so the first
// call is the probe's first hit. RedZone fails if BPF did not count every
// call.
func RedZone(ctx context.Context, cfg RedZoneConfig) (RedZoneResult, error) {
	var res RedZoneResult
	if cfg.Calls < 1 || cfg.Samples < 1 {
		return res, fmt.Errorf("red zone: %d calls x %d samples", cfg.Calls, cfg.Samples)
	}
	tg, err := LookupTarget("redzone")
	if err != nil {
		return res, err
	}
	_, nopAt, nop5At := cpu.RedZoneTarget()
	var probes *Probes
	if cfg.Site != RedZoneNone {
		off := map[string]int{RedZoneNop: nopAt, RedZoneNop5: nop5At}
		at, ok := off[cfg.Site]
		if !ok {
			return res, fmt.Errorf("red zone: unknown site %q", cfg.Site)
		}
		probes, err = Attach(ctx, Spec{Path: tg.Path, Offsets: []uint64{tg.Offset + uint64(at)}, Mode: cfg.Mode, Pid: os.Getpid()})
		if err != nil {
			return res, err
		}
		defer probes.Close()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for range cfg.Samples {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		c0, _ := host.ThreadCPUTime()
		t0 := time.Now()
		corrupted, mask := redzoneLoop(tg.PC, cfg.Calls)
		el := time.Since(t0)
		c1, _ := host.ThreadCPUTime()
		res.Samples = append(res.Samples, float64(cfg.Calls)/el.Seconds())
		res.CPUSamples = append(res.CPUSamples, float64(cfg.Calls)/(c1-c0).Seconds())
		res.Calls += cfg.Calls
		res.Corrupted += corrupted
		res.Mask |= mask
	}
	if probes != nil {
		if res.Hits, err = probes.Hits(); err != nil {
			return res, err
		}
		if res.Hits != res.Calls {
			return res, fmt.Errorf("red zone: BPF counted %d hits for %d calls", res.Hits, res.Calls)
		}
	}
	return res, nil
}
