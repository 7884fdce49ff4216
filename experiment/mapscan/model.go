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

// RunModel runs one model run with the maps walk variant.
func RunModel(ctx context.Context, variant procfs.Variant, o RunSpec) (Stats, error) {
	if err := o.Check(); err != nil {
		return Stats{}, err
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
