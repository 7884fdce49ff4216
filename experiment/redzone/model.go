package redzone

import (
	"context"
	"fmt"
	"time"

	"mmlab/binfmt"
	"mmlab/cpu"
	"mmlab/experiment"
	"mmlab/host"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/uprobes"
)

// designKernel is one design's model kernel: one CPU, one process that
// maps cpu.RedZoneProgram, a counting uprobe on the target's nop5.
type designKernel struct {
	*binfmt.Kernel
	opt   uprobes.Optimize
	task  *kernel.Task
	entry uint64
	hits  *binfmt.Counter
	// The red-zone check so far.
	calls, corrupted, mask uint64
}

// newDesignKernel returns the kernel of design opt on the machine d, with
// the uprobe unless bare (the no-probe baseline).
func newDesignKernel(d machine.Description, sim *kernel.Sim, opt uprobes.Optimize, bare bool) (*designKernel, error) {
	mk, err := binfmt.NewKernelFor(d, 1, host.Threads{}, sim, uprobes.Config{Flavor: uprobes.TasksTrace, Design: kernel.DesignBefore, HitPath: uprobes.HitPathToday, Optimize: opt})
	if err != nil {
		return nil, err
	}
	p, err := binfmt.NewProgram(&mk.Machine.NS.MM, "/usr/bin/redzone", cpu.RedZoneProgram)
	if err != nil {
		mk.Stop()
		return nil, err
	}
	k := &designKernel{Kernel: mk, opt: opt, entry: p.Addr("redzone_loop"), hits: binfmt.NewCounter()}
	if k.task, err = k.Process("redzone", p, 1); err != nil {
		k.Stop()
		return nil, err
	}
	if bare {
		return k, nil
	}
	if _, err := k.Probe(p, "redzone_nop5", &k.hits.Consumer); err != nil {
		k.Stop()
		return nil, fmt.Errorf("redzone %v: register: %w", opt, err)
	}
	return k, nil
}

// run calls the target n times and returns how long it took: the model
// thread's CPU time where the OS gives it, else the wall time. The calls
// join the red-zone check.
func (k *designKernel) run(n int) (time.Duration, error) {
	var stop cpu.Stop
	var regs cpu.Regs
	var el time.Duration
	r := k.Machine.Start(k.task, 0, 0, func(r *kernel.Runner) {
		el = k.elapsed(func() { stop = binfmt.Loop(r, 0, k.entry, uint64(n)) })
		regs = r.Regs
	})
	r.Wait()
	if stop.Reason != cpu.StopHalt {
		return 0, fmt.Errorf("redzone %v: %v, regs %v, signals %v", k.opt, stop, &regs, k.task.PendingSignals())
	}
	k.calls += uint64(n)
	k.corrupted += regs.R[cpu.RSI]
	k.mask |= regs.R[cpu.RBX]
	return el, nil
}

// RunModel runs the designs env.Variants each on its own model kernel, and
// a kernel without the uprobe as the baseline of the cost per hit: a
// warm-up of o.Calls calls (the first hit optimizes the site), then
// o.Samples samples of o.Calls calls, the kernels in turn. It emits one
// result per design, with its ratios to off's when off ran.
func RunModel(ctx context.Context, o *Options, env experiment.Env, emit func(Result)) error {
	o.ModelClock = clockName()
	if env.Sim != nil {
		o.ModelClock = "virtual"
	}
	var ks []*designKernel
	var mks []*binfmt.Kernel
	for i, v := range append([]string{uprobes.OptimizeOff.String()}, env.Variants...) {
		opt, err := uprobes.Optimizations.Parse(v)
		if err != nil {
			return err
		}
		k, err := newDesignKernel(env.Machine, (*kernel.Sim)(env.Sim), opt, i == 0)
		if err != nil {
			return err
		}
		defer k.Stop()
		ks = append(ks, k)
		mks = append(mks, k.Kernel)
	}
	// Step 0 is the warm-up; then a sample per step, the kernels in turn.
	els := make([][]time.Duration, len(ks))
	hits := make([][]uint64, len(ks))
	err := binfmt.InTurn(mks, 1+o.Samples, func(i, s int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		k := ks[i]
		h0 := k.hits.Hits()
		el, err := k.run(o.Calls)
		if s > 0 {
			els[i] = append(els[i], el)
			hits[i] = append(hits[i], k.hits.Hits()-h0)
		}
		return err
	})
	if err != nil {
		return err
	}
	rates := make([][]float64, len(ks))
	hitNs := make([][]float64, len(ks))
	for i := 1; i < len(ks); i++ {
		for s, el := range els[i] {
			rates[i] = append(rates[i], float64(hits[i][s])/el.Seconds())
			hitNs[i] = append(hitNs[i], float64(el-els[0][s])/float64(o.Calls))
		}
	}
	off := -1
	for i, k := range ks[1:] {
		if k.opt == uprobes.OptimizeOff {
			off = i + 1
		}
	}
	for i, k := range ks[1:] {
		i++
		if h := k.hits.Hits(); h != k.calls {
			return fmt.Errorf("redzone %v: %d hits for %d calls", k.opt, h, k.calls)
		}
		r := NewResult(env.Row(k.opt.String()), AttachModel, SiteNop5,
			rates[i], k.calls, k.hits.Hits(), k.corrupted, k.mask)
		r.SetHitNsRuns(hitNs[i])
		if off >= 0 && i != off {
			r.VsInt3 = PairedVsInt3(rates[i], rates[off], hitNs[i], hitNs[off])
		}
		env.Progress("%s: %.3f M hits/s, %.0f ns per hit, %d of %d calls found %s changed", k.opt, r.Mops, r.HitNs, r.Corrupted, r.Calls, Slots(r.Mask))
		emit(r)
	}
	return nil
}

// elapsed runs fn and returns the calling thread's CPU time it took, or
// the wall time where the OS gives no thread clock.
func (k *designKernel) elapsed(fn func()) time.Duration {
	c0, ok := k.ThreadCPUTime()
	t0 := time.Now()
	fn()
	if c1, _ := k.ThreadCPUTime(); ok {
		return c1 - c0
	}
	return time.Since(t0)
}

// clockName says which clock the rates use.
func clockName() string {
	if _, ok := host.ThreadCPUTime(); ok {
		return "thread-cpu"
	}
	return "wall"
}
