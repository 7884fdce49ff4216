package uprobes

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"mmlab/cpu"
	"mmlab/kernel"
	"mmlab/mm"
	"mmlab/mm/pgtable"
)

// Attach modes, named as the live ones.
const (
	ModeMulti = "uprobe_multi" // one link: N registers; detach N nosync + one sync
	ModePerf  = "perf"         // N events: each detach is nosync + sync
)

// AttachConfig is one model attach/detach measurement.
type AttachConfig struct {
	// Flavors are measured in turn, run by run, each on its own model
	// kernel, so that all see the same machine.
	Flavors []string
	Modes   []string // ModeMulti, ModePerf
	Ns      []int    // probes per attach, at most SledLen
	Runs    int
	// Procs processes map the file; the first CPUs of them (one per model
	// CPU) run a loop through the probed sled meanwhile, so grace periods
	// meet running readers.
	Procs, CPUs int
}

// AttachRun is one attach and detach.
type AttachRun struct {
	Flavor         string
	Mode           string
	N              int
	Attach, Detach time.Duration
}

// SledLen is the number of nops the probes go on.
const SledLen = 64

// AttachCost attaches and detaches N uprobes on a file that c.Procs model
// processes map, c.Runs times round-robin over counts and modes, and
// returns each run. Attach is the N registrations; detach is every
// UnregisterNosync and the UnregisterSync calls of the mode (the flavour's
// grace period: the writer-side price of Tasks Trace).
func AttachCost(ctx context.Context, c AttachConfig) ([]AttachRun, error) {
	for _, m := range c.Modes {
		if m != ModeMulti && m != ModePerf {
			return nil, fmt.Errorf("uprobes: attach: unknown mode %q", m)
		}
	}
	for _, n := range c.Ns {
		if n < 1 || n > SledLen {
			return nil, fmt.Errorf("uprobes: attach: n %d not in 1..%d", n, SledLen)
		}
	}
	var stops []func()
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	type target struct {
		flavor string
		u      *Uprobes
		in     *mm.Inode
		base   uint64
	}
	var ts []target
	for _, fl := range c.Flavors {
		u, in, base, stop, err := attachKernel(c, fl)
		if err != nil {
			if stop != nil {
				stop()
			}
			return nil, err
		}
		stops = append(stops, stop)
		ts = append(ts, target{fl, u, in, base})
	}
	var out []AttachRun
	for range c.Runs {
		for _, n := range c.Ns {
			for _, mode := range c.Modes {
				if err := ctx.Err(); err != nil {
					return out, err
				}
				for _, t := range ts {
					run, err := attachOnce(t.u, t.in, t.base, mode, n)
					if err != nil {
						return out, err
					}
					run.Flavor = t.flavor
					out = append(out, run)
				}
			}
		}
	}
	return out, nil
}

// attachKernel is one flavour's model kernel for AttachCost: a sled of
// nops in a file that c.Procs processes map, the first c.CPUs of them
// running a loop through it. stop ends it.
func attachKernel(c AttachConfig, flavor string) (u *Uprobes, in *mm.Inode, base uint64, stop func(), err error) {
	a := cpu.NewAsm(triggerText)
	a.Label("loop").Call("sled").Dec32(cpu.RCX).Jnz("loop").Hlt()
	a.Label("sled")
	for range SledLen {
		a.Nop()
	}
	a.Ret()
	code, err := a.Assemble()
	if err != nil {
		return nil, nil, 0, func() {}, err
	}
	sled, _ := a.Addr("sled")
	mach := kernel.NewMachine(max(1, c.CPUs))
	u, err = New(mach, flavor)
	if err != nil {
		mach.Stop()
		return nil, nil, 0, nil, err
	}
	in = mm.NewInode("/usr/lib/libsled.so", uint64(len(code)), func(off uint64) byte { return code[off] })
	file := mm.Open(in)
	var stopping atomic.Bool
	var runners []*kernel.Runner
	stop = func() {
		stopping.Store(true)
		for _, r := range runners {
			<-r.Done()
		}
		mach.Stop()
	}
	for i := range c.Procs {
		t := kernel.NewTaskMM(fmt.Sprint("mapper", i))
		t.MM.Hooks = u
		if _, err := t.MM.Mmap(nil, triggerText, uint64(len(code)), mm.PROT_READ|mm.PROT_EXEC, mm.MAP_PRIVATE|mm.MAP_FIXED, file, 0); err != nil {
			return nil, nil, 0, stop, err
		}
		if _, err := t.MM.Mmap(nil, triggerStack-16*pgtable.PageSize, 16*pgtable.PageSize, mm.PROT_READ|mm.PROT_WRITE,
			mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED, nil, 0); err != nil {
			return nil, nil, 0, stop, err
		}
		if i >= c.CPUs {
			continue
		}
		started := make(chan struct{})
		var once sync.Once
		runners = append(runners, mach.Start(t, i, 0, func(r *kernel.Runner) {
			defer once.Do(func() { close(started) })
			for n := 0; !stopping.Load(); n++ {
				if n == 1 {
					once.Do(func() { close(started) })
				}
				r.Regs = cpu.Regs{RIP: triggerText}
				r.Regs.R[cpu.RSP], r.Regs.R[cpu.RCX] = triggerStack-64, 256
				if s := r.Run(); s.Reason != cpu.StopHalt {
					return
				}
			}
		}))
		<-started // measure with the mapper running
	}
	return u, in, sled - triggerText, stop, nil
}

// attachOnce times one attach of n probes and its detach.
func attachOnce(u *Uprobes, in *mm.Inode, base uint64, mode string, n int) (AttachRun, error) {
	run := AttachRun{Mode: mode, N: n}
	var hits atomic.Int64
	ups := make([]*Uprobe, n)
	cons := make([]*Consumer, n)
	start := time.Now()
	for i := range n {
		cons[i] = &Consumer{Handler: func(*kernel.Runner) int { hits.Add(1); return 0 }}
		up, err := u.Register(nil, in, base+uint64(i), cons[i])
		if err != nil {
			return run, err
		}
		ups[i] = up
	}
	run.Attach = time.Since(start)
	start = time.Now()
	for i := range n {
		if err := u.UnregisterNosync(nil, ups[i], cons[i]); err != nil {
			return run, err
		}
		if mode == ModePerf {
			u.UnregisterSync(nil)
		}
	}
	if mode != ModePerf {
		u.UnregisterSync(nil)
	}
	run.Detach = time.Since(start)
	return run, nil
}
