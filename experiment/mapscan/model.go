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
	scanners := make([]scanner, NumScanners)
	var scanErr [NumScanners]error
	if o.Scanners != "none" {
		start := time.Now()
		for i := range NumScanners {
			sys.Spawn(1, 0, func(th *sched.Thread) { busyWait(th, start, o.BusyDuration) })
			sys.Spawn(1, ScannerNice, func(th *sched.Thread) {
				t := kernel.NewTask("scanner")
				t.Thread = th
				s := &scanners[i]
				s.th, s.task, s.since = th, t, time.Now()
				s.f = procfs.OpenMaps(m, procfs.Options{Variant: variant, Preempt: o.Preempt, Waiter: t, Point: s.point, Thread: th})
				f := s.f
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
		st.Preempted = scanners[i].held.merge(st.Preempted)
		if t := scanners[i].task; t != nil {
			for lock, b := range t.TakeBlocked() {
				st.ScannersSlept = Held{lock: {Count: int(b.Count), MaxUS: us(b.Max)}}.merge(st.ScannersSlept)
			}
		}
	}
	return st, ctx.Err()
}

// busyWait is busywait.c on a model thread: spin for busy, sleep
// BusySleep, repeat (spin for ever if busy is 0). A model choice the kernel
// does not make: the periods are counted from start, the same for every
// busy-waiter, so that the two of a CPU spin and sleep in step. busywait.c
// restarts its period when its sleep ends, and two of them drift apart;
// under CFS the nice-15 scanners keep their weight's share anyway, but the
// model CPUs have no time slices, and busy-waiters out of step would leave
// the scanners no time at all.
func busyWait(th *sched.Thread, start time.Time, busy time.Duration) {
	t := kernel.NewTask("busy")
	t.Thread = th
	period := busy + BusySleep
	for !th.Stopping() {
		if busy == 0 {
			th.Point()
			continue
		}
		if phase := time.Since(start) % period; phase < busy {
			th.Point()
		} else {
			t.Block(func() { time.Sleep(period - phase) })
		}
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

// Slice is how long a scanner runs before it lets another scanner of its
// CPU have a turn: EEVDF's slice for tasks of one nice level
// (sysctl_sched_base_slice, 0.75 ms).
const Slice = 750 * time.Microsecond

// scanner is one scanner thread's preemption point and wait accounting.
type scanner struct {
	th       *sched.Thread
	task     *kernel.Task
	f        *procfs.MapsFile
	held     Held
	switches uint64    // the thread's context switches when last seen
	since    time.Time // when it last got its CPU, as far as seen
}

func (s *scanner) count() uint64 {
	v, iv := s.th.Switches()
	return v + iv
}

// point is the scanner's preemption point (procfs Options.Point). It is
// th.Point, or th.Yield once the scanner has run for Slice, which also lets
// the other scanner run: a model choice the kernel does not make in this
// form. The model CPUs have no time slices, so without it a scanner gives
// way to its peer only when it blocks or ends a pass, where CFS would
// switch between them every slice at the points the preemption model
// offers (the return to user space with PreemptNone). A switch-out while
// the walk holds a lock is accounted to that lock (f.Holding).
func (s *scanner) point() {
	lock := s.f.Holding()
	n0 := s.count()
	if n0 != s.switches { // it slept or was switched out since: a new slice
		s.switches, s.since = n0, time.Now()
	}
	t0 := time.Now()
	if t0.Sub(s.since) >= Slice {
		s.th.Yield()
		s.since = time.Now()
	} else {
		s.th.Point()
	}
	n := s.count()
	if n == n0 {
		return
	}
	s.switches, s.since = n, time.Now()
	if lock == "" {
		return
	}
	if s.held == nil {
		s.held = Held{}
	}
	hs := s.held[lock]
	hs.Count++
	hs.MaxUS = max(hs.MaxUS, us(s.since.Sub(t0)))
	s.held[lock] = hs
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
