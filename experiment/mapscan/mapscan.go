// Package mapscan is Paul McKenney's proc-mmap_sem-test, the benchmark of
// seed 003, on the model: a mapper task keeps re-mapping (MAP_FIXED |
// MAP_POPULATE) or unmapping random pages of a 128 MiB anonymous region and
// times every call, while two scanner tasks read its /proc/PID/maps in a
// loop, as text or with PROCMAP_QUERY. The scanners run at nice 15 on a
// model CPU shared with a normal-priority busy task (spin 2 ms, sleep 1 ms),
// so the busy task preempts a scanner at its next preemption point: with the
// Before walk the scanner may then hold the mmap read lock, and the mapper's
// mmap and munmap wait for the whole preemption (the priority inversion the
// seed removes); with the After walk it holds no lock there.
//
// The types here are shared with the live run (mmlab/live/mapscan).
package mapscan

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"mmlab/uapi"
	"time"

	"mmlab/errno"
	"mmlab/kernel"
	"mmlab/mm"
	"mmlab/procfs"
	"mmlab/sched"
)

// Cases are the scanner kinds, the key field "scanners".
var Cases = []string{"none", "text", "query"}

// The experiment's constants, as in the seed's benchmark.
const (
	RegionSize  = 128 << 20
	PageSize    = 4096
	MapperSleep = 10 * time.Microsecond
	BusySpin    = 2 * time.Millisecond
	BusySleep   = time.Millisecond
	ScannerNice = 15
	NumScanners = 2
	WarmupOps   = 4000 // untimed operations that fragment the region first
	regionPages = RegionSize / PageSize
)

// Options set one run.
type Options struct {
	Scanners string        // "none", "text" or "query"
	Duration time.Duration // how long the mapper is timed
	Seed     uint64        // of the mapper's random pages
}

// Stats are one run's figures. Lock waits are the model's only.
type Stats struct {
	Ops, MmapOps, MunmapOps   int
	MmapMeanUS, MmapMaxUS     float64
	MunmapMeanUS, MunmapMaxUS float64
	OpMeanUS, OpMaxUS         float64
	LockWaitMeanUS            float64 // time blocked on any lock per op
	LockWaitMaxUS             float64
	ScanPasses                int // full scans the scanners finished
}

// Fields returns s as report metrics; lockWaits adds the model-only ones.
func (s Stats) Fields(lockWaits bool) map[string]any {
	f := map[string]any{
		"ops":            s.Ops,
		"scan_passes":    s.ScanPasses,
		"mmap_mean_us":   s.MmapMeanUS,
		"mmap_max_us":    s.MmapMaxUS,
		"munmap_mean_us": s.MunmapMeanUS,
		"munmap_max_us":  s.MunmapMaxUS,
		"op_mean_us":     s.OpMeanUS,
		"op_max_us":      s.OpMaxUS,
	}
	if lockWaits {
		f["lock_wait_mean_us"] = s.LockWaitMeanUS
		f["lock_wait_max_us"] = s.LockWaitMaxUS
	}
	return f
}

// Acc accumulates the mapper's timings into Stats.
type Acc struct {
	mmapSum, munmapSum, waitSum time.Duration
	mmapMax, munmapMax, waitMax time.Duration
	mmapN, munmapN              int
}

// Add records one call: mmap (else munmap) that took d, blocked wait.
func (a *Acc) Add(mmap bool, d, wait time.Duration) {
	if mmap {
		a.mmapN++
		a.mmapSum += d
		a.mmapMax = max(a.mmapMax, d)
	} else {
		a.munmapN++
		a.munmapSum += d
		a.munmapMax = max(a.munmapMax, d)
	}
	a.waitSum += wait
	a.waitMax = max(a.waitMax, wait)
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

func mean(sum time.Duration, n int) float64 {
	if n == 0 {
		return 0
	}
	return us(sum) / float64(n)
}

// Stats returns the figures so far.
func (a *Acc) Stats() Stats {
	n := a.mmapN + a.munmapN
	return Stats{
		Ops: n, MmapOps: a.mmapN, MunmapOps: a.munmapN,
		MmapMeanUS: mean(a.mmapSum, a.mmapN), MmapMaxUS: us(a.mmapMax),
		MunmapMeanUS: mean(a.munmapSum, a.munmapN), MunmapMaxUS: us(a.munmapMax),
		OpMeanUS: mean(a.mmapSum+a.munmapSum, n), OpMaxUS: us(max(a.mmapMax, a.munmapMax)),
		LockWaitMeanUS: mean(a.waitSum, n), LockWaitMaxUS: us(a.waitMax),
	}
}

// regionBase is where the model maps the region.
const regionBase = 0x7f0000000000

// RunModel runs one model run with the maps walk variant.
func RunModel(ctx context.Context, variant procfs.Variant, o Options) (Stats, error) {
	if variant != procfs.Before && variant != procfs.After {
		return Stats{}, fmt.Errorf("mapscan: variant %q: want before or after", variant)
	}
	switch o.Scanners {
	case "none", "text", "query":
	default:
		return Stats{}, fmt.Errorf("mapscan: scanners %q: want none, text or query", o.Scanners)
	}
	m := mm.New()
	if _, err := m.Mmap(nil, regionBase, RegionSize, mm.PROT_READ|mm.PROT_WRITE, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED, nil, 0); err != nil {
		return Stats{}, err
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x6d61707363616e))
	op := func(w *kernel.Task) (bool, error) {
		addr := uint64(regionBase + rng.IntN(regionPages)*PageSize)
		if rng.IntN(2) == 0 {
			_, err := m.Mmap(w, addr, PageSize, mm.PROT_READ|mm.PROT_WRITE, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED|mm.MAP_POPULATE, nil, 0)
			return true, err
		}
		return false, m.Munmap(w, addr, PageSize)
	}
	for range WarmupOps {
		if _, err := op(nil); err != nil {
			return Stats{}, err
		}
	}

	sys := sched.NewSystem(2)
	var acc Acc
	var opErr error
	mapperDone := make(chan struct{})
	// The mapper: CPU 0, normal priority.
	sys.Spawn(0, 0, func(th *sched.Thread) {
		defer close(mapperDone)
		t := kernel.NewTask("mapper")
		t.Thread = th
		deadline := time.Now().Add(o.Duration)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			t.TakeBlocked()
			t0 := time.Now()
			isMmap, err := op(t)
			d := time.Since(t0)
			if err != nil {
				opErr = err
				return
			}
			var wait time.Duration
			for _, b := range t.TakeBlocked() {
				wait += b.Total
			}
			acc.Add(isMmap, d, wait)
			t.Block(func() { time.Sleep(MapperSleep) })
		}
	})
	passes := make([]int, NumScanners)
	var scanErr [NumScanners]error
	if o.Scanners != "none" {
		// The busy task: CPU 1, normal priority.
		sys.Spawn(1, 0, func(th *sched.Thread) {
			t := kernel.NewTask("busy")
			t.Thread = th
			for !th.Stopping() {
				t0 := time.Now()
				for time.Since(t0) < BusySpin {
					th.Point()
				}
				t.Block(func() { time.Sleep(BusySleep) })
			}
		})
		for i := range NumScanners {
			sys.Spawn(1, ScannerNice, func(th *sched.Thread) {
				t := kernel.NewTask("scanner")
				t.Thread = th
				f := procfs.OpenMaps(m, procfs.Options{Variant: variant, Waiter: t, Point: th.Point, Thread: th})
				name := make([]byte, 256)
				for !th.Stopping() {
					var err error
					if o.Scanners == "text" {
						err = scanText(f)
					} else {
						err = scanQuery(f, name)
					}
					if err != nil {
						scanErr[i] = err
						return
					}
					passes[i]++
					th.Yield() // equal priorities share the CPU through Yield
				}
			})
		}
	}
	<-mapperDone
	sys.Stop()
	if opErr != nil {
		return Stats{}, fmt.Errorf("mapscan: mapper: %w", opErr)
	}
	for _, err := range scanErr {
		if err != nil {
			return Stats{}, fmt.Errorf("mapscan: scanner: %w", err)
		}
	}
	st := acc.Stats()
	for _, p := range passes {
		st.ScanPasses += p
	}
	return st, ctx.Err()
}

// scanText reads the whole maps text, one 4 KiB chunk per read.
func scanText(f *procfs.MapsFile) error {
	f.Rewind()
	for {
		b, err := f.Read()
		if err != nil || len(b) == 0 {
			return err
		}
	}
}

// scanQuery walks every VMA with PROCMAP_QUERY (COVERING_OR_NEXT_VMA from 0,
// then from the end of each VMA found), asking for names.
func scanQuery(f *procfs.MapsFile, name []byte) error {
	addr := uint64(0)
	for {
		q := uapi.ProcmapQuery{Size: uapi.SizeofProcmapQuery, QueryAddr: addr,
			QueryFlags: uapi.PROCMAP_QUERY_COVERING_OR_NEXT_VMA, VMANameSize: uint32(len(name)), VMANameAddr: 1}
		err := f.Query(&q, name, nil)
		if err != nil {
			if isENOENT(err) {
				return nil
			}
			return err
		}
		addr = q.VMAEnd
	}
}

func isENOENT(err error) bool { return errors.Is(err, errno.ENOENT) }
