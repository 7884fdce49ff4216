package uprobe

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"
)

// FirstHit attaches a probe of mode m on the nop5 target for this process
// and, on one locked OS thread, times the target's first call (whose hit,
// on a kernel with optimized uprobes, rewrites the site into a call to a
// trampoline) and then the mean of its next later calls; it reports
// whether the site held a call (0xE8) after the first one. The probe is
// detached on return, which restores the nop5; the process keeps its
// trampoline, so only its first FirstHit (or first optimized probe of any
// kind) maps one. FirstHit fails if BPF did not count every call.
func FirstHit(ctx context.Context, m string, later int) (FirstHitResult, error) {
	var res FirstHitResult
	if later < 1 {
		return res, fmt.Errorf("first hit: %d later calls", later)
	}
	tg, err := LookupTarget("nop5")
	if err != nil {
		return res, err
	}
	p, err := Attach(ctx, Spec{Path: tg.Path, Offsets: []uint64{tg.Offset}, Mode: m, Pid: os.Getpid()})
	if err != nil {
		return res, err
	}
	defer p.Close()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := time.Now()
	callLoop(tg.PC, 1)
	res.First = time.Since(start)
	site := make([]byte, 1)
	if err := readAt("/proc/self/mem", site, int64(tg.PC)); err != nil {
		return res, err
	}
	res.Optimized = site[0] == 0xe8
	start = time.Now()
	callLoop(tg.PC, uint64(later))
	res.Hit = time.Since(start) / time.Duration(later)
	hits, err := p.Hits()
	if err != nil {
		return res, err
	}
	if hits != uint64(1+later) {
		return res, fmt.Errorf("first hit: BPF counted %d hits for %d calls", hits, 1+later)
	}
	return res, p.Close()
}
