package mapscan

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"mmlab/errno"
	"mmlab/experiment"
	"mmlab/kernel"
	"mmlab/mm"
	"mmlab/procfs"
	"mmlab/sched"
	"mmlab/uapi"
)

// Model runs the benchmark on the model, once per variant of env: o.Runs
// runs of each case with that maps walk.
func Model(ctx context.Context, o *Options, env experiment.Env, emit func(Result)) error {
	for _, name := range env.Variants {
		v, err := procfs.ParseVariant(name)
		if err != nil {
			return err
		}
		row := experiment.Row{Target: experiment.Model, Variant: name}
		one := func(ctx context.Context, r RunSpec) (Stats, error) { return RunModel(ctx, v, r) }
		if err := RunCases(ctx, o, row, one, emit); err != nil {
			return err
		}
	}
	return nil
}

// regionBase is where the model maps the region.
const regionBase = 0x7f0000000000

// RunModel runs one model run with the maps walk variant: the mapper alone
// on model CPU 0; on model CPU 1 the two nice-15 scanners, each with its
// normal-priority busy-waiter, as run-proc-vs-map.sh places them on a busy
// CPU. The scanners' kernel code is preempted as o.Preempt says. A model
// choice the kernel does not make: the model CPUs have no time slices, so a
// nice-15 scanner runs only while both busy-waiters sleep (where CFS would
// also give it its small weight's share).
func RunModel(ctx context.Context, variant procfs.Variant, o RunSpec) (Stats, error) {
	if err := o.Check(); err != nil {
		return Stats{}, err
	}
	m := mm.New()
	// mapper.c: the whole region MAP_POPULATE.
	if _, err := m.Mmap(nil, regionBase, RegionSize, mm.PROT_READ|mm.PROT_WRITE, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED|mm.MAP_POPULATE, nil, 0); err != nil {
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
			acc.AddBlocked(isMmap, d, t.TakeBlocked())
			t.Block(func() { time.Sleep(MapperSleep) })
		}
	})
	passes := make([]int, NumScanners)
	held := make([]Held, NumScanners)
	var scanErr [NumScanners]error
	if o.Scanners != "none" {
		start := time.Now()
		for i := range NumScanners {
			sys.Spawn(1, 0, func(th *sched.Thread) { busyWait(th, start, o.BusyDuration) })
			sys.Spawn(1, ScannerNice, func(th *sched.Thread) {
				t := kernel.NewTask("scanner")
				t.Thread = th
				var f *procfs.MapsFile
				point := func() { held[i].point(th, f) }
				f = procfs.OpenMaps(m, procfs.Options{Variant: variant, Preempt: o.Preempt, Waiter: t, Point: point, Thread: th})
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
	for i, p := range passes {
		st.ScanPasses += p
		st.Preempted = held[i].merge(st.Preempted)
	}
	return st, ctx.Err()
}

// busyWait is busywait.c on a model thread: spin for busy (wall time, for
// ever if 0), sleep BusySleep, repeat. Like busywait.c it reads the clock,
// so a period starts when its sleep ends, whether the thread got the CPU
// then or not: two busy-waiters of one CPU, started together, spin and
// sleep in step.
func busyWait(th *sched.Thread, start time.Time, busy time.Duration) {
	t := kernel.NewTask("busy")
	t.Thread = th
	t0 := start
	for !th.Stopping() {
		for busy == 0 || time.Since(t0) < busy {
			th.Point()
			if th.Stopping() {
				return
			}
		}
		t.Block(func() {
			time.Sleep(BusySleep)
			t0 = time.Now()
		})
	}
}

// Held is a scanner's wait accounting: how often it was preempted inside
// the walk, by the lock it held meanwhile (procfs.MapsFile.Holding), and
// for how long at most it was off its CPU then.
type Held map[string]HeldStat

// HeldStat counts the preemptions of scanners holding one lock.
type HeldStat struct {
	Count int     `json:"count"`
	MaxUS float64 `json:"max_us"` // the longest time off the CPU
}

// point is the scanner's preemption point: th.Point, accounted to the lock
// f holds if the scanner was switched out.
func (h *Held) point(th *sched.Thread, f *procfs.MapsFile) {
	lock := f.Holding()
	v0, iv0 := th.Switches()
	t0 := time.Now()
	th.Point()
	if v, iv := th.Switches(); lock != "" && v+iv != v0+iv0 {
		if *h == nil {
			*h = Held{}
		}
		hs := (*h)[lock]
		hs.Count++
		hs.MaxUS = max(hs.MaxUS, us(time.Since(t0)))
		(*h)[lock] = hs
	}
}

// merge adds h to into (which may be nil) and returns it.
func (h Held) merge(into Held) Held {
	for lock, hs := range h {
		if into == nil {
			into = Held{}
		}
		cur := into[lock]
		cur.Count += hs.Count
		cur.MaxUS = max(cur.MaxUS, hs.MaxUS)
		into[lock] = cur
	}
	return into
}

// AddBlocked is Add for a model call, with the time it blocked per lock
// (kernel.Task.TakeBlocked): the slowest call's is kept.
func (a *Acc) AddBlocked(mmap bool, d time.Duration, blocked map[string]kernel.BlockStat) {
	var wait time.Duration
	for _, b := range blocked {
		wait += b.Total
	}
	if d > max(a.mmapMax, a.munmapMax) {
		a.slowest = map[string]float64{}
		for lock, b := range blocked {
			a.slowest[lock] = us(b.Total)
		}
	}
	a.Add(mmap, d, wait)
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
