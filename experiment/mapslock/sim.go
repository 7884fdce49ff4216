package mapslock

import (
	"context"
	"fmt"
	"time"

	"mmlab/experiment"
	"mmlab/kernel"
	"mmlab/mm"
	"mmlab/procfs"
	"mmlab/sched"
	"mmlab/uapi"
)

// The simulated machine's CPUs: the prober runs on CPU 0, the writer on
// CPU 1, so that the query and the mprotect overlap in virtual time.
const (
	simCPUs   = 2
	proberCPU = 0
	writerCPU = 1
)

// queryInstructions is PROCMAP_QUERY's work inside the ioctl besides its
// entry and exit: copying the 104-byte struct procmap_query in and out,
// the lock (per-VMA or mmap_lock) and its release, the VMA's lookup and
// the answer's fields. A model choice (500 instructions), no count of
// do_procmap_query() being at hand.
const queryInstructions = 500

// runSim runs o.Runs probes of addr on a simulated machine of its own (the
// case's): the region mapped, then each probe's mprotect and queries as two
// tasks on two virtual CPUs, timed on the model's clock (sched.Now). It
// returns each run and the time its queries slept on mmap_lock (ms).
func runSim(ctx context.Context, o *Options, env experiment.Env, variant procfs.Variant, addr uint64) ([]Run, []float64, error) {
	mach, err := kernel.NewSimMachine(env.Machine, simCPUs, kernel.Sim{Seed: env.Sim.Seed, Until: env.Sim.Until})
	if err != nil {
		return nil, nil, err
	}
	defer mach.Stop()
	var runs []Run
	var blocked []float64
	err = mach.Main("mapslock", func() error {
		m, err := newSpace(&mach.NS.MM, env.Machine.Features, uint64(o.Size))
		if err != nil {
			return err
		}
		for range o.Runs {
			if err := ctx.Err(); err != nil {
				return err
			}
			run, b, err := probeSim(mach, m, variant, addr, uint64(o.Size))
			if err != nil {
				return err
			}
			runs = append(runs, run)
			blocked = append(blocked, b)
		}
		return nil
	})
	return runs, blocked, err
}

// probeSim is probeModel on the simulated machine mach: the writer's
// mprotect (a syscall's entry and exit, then do_mprotect_pkey(), whose PTE
// walk mm charges) on writerCPU, the prober's PROCMAP_QUERY ioctls
// (each a syscall's entry and exit, then queryInstructions of work) back to
// back on proberCPU until the mprotect has returned, then the region made
// read-write again.
func probeSim(mach *kernel.Machine, m *mm.MM, variant procfs.Variant, addr, size uint64) (Run, float64, error) {
	writer := mach.NewTask("mprotect")
	prober := mach.NewTask("query")
	f, err := procfs.OpenMaps(m, procfs.Options{Variant: variant, Waiter: prober})
	if err != nil {
		return Run{}, 0, err
	}
	queryWork := time.Duration(queryInstructions * mach.Desc.Costs.Instruction.NS)
	var start time.Time
	var hold time.Duration
	var werr, qerr error
	done := false
	wr := mach.Start(writer, writerCPU, 0, func(*kernel.Runner) {
		start = sched.Now()
		sched.ChargeCost(sched.CostSyscall, 1)
		werr = m.Mprotect(writer, regionBase, size, mm.PROT_READ)
		hold = sched.Since(start)
		done = true
	})
	var times [][2]time.Time
	pr := mach.Start(prober, proberCPU, 0, func(*kernel.Runner) {
		for !done && qerr == nil {
			q := uapi.ProcmapQuery{Size: uapi.SizeofProcmapQuery, QueryAddr: addr}
			t0 := sched.Now()
			sched.ChargeCost(sched.CostSyscall, 1)
			qerr = f.Query(&q, nil, nil)
			sched.Charge(queryWork)
			times = append(times, [2]time.Time{t0, sched.Now()})
		}
	})
	wr.Wait()
	pr.Wait()
	if werr != nil {
		return Run{}, 0, fmt.Errorf("mprotect: %w", werr)
	}
	if qerr != nil {
		return Run{}, 0, fmt.Errorf("PROCMAP_QUERY %#x: %w", addr, qerr)
	}
	spans := make([]Span, len(times))
	for i, t := range times {
		spans[i] = Span{t[0].Sub(start), t[1].Sub(start)}
	}
	blocked := prober.TakeBlocked()[uapi.MmapLockName].Total
	if err := m.Mprotect(nil, regionBase, size, mm.PROT_READ|mm.PROT_WRITE); err != nil {
		return Run{}, 0, err
	}
	return Classify(hold, spans), ms(blocked), nil
}
