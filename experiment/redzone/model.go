package redzone

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"mmlab/cpu"
	"mmlab/experiment"
	"mmlab/kernel"
	"mmlab/mm"
	"mmlab/mm/pgtable"
	"mmlab/report"
	"mmlab/uprobes"
)

const (
	modelText  = 0x400000
	modelStack = 0x7ff000000000
)

// designKernel is one design's model kernel: one CPU, one process that
// maps cpu.RedZoneProgram and a stack, a counting uprobe on the target's
// nop5.
type designKernel struct {
	opt   uprobes.Optimize
	mach  *kernel.Machine
	task  *kernel.Task
	entry uint64
	hits  atomic.Uint64 // written on the task's thread, read after each run
	// The red-zone check so far.
	calls, corrupted, mask uint64
}

// newDesignKernel returns the kernel of design opt, with the uprobe unless
// bare (the no-probe baseline).
func newDesignKernel(opt uprobes.Optimize, bare bool) (*designKernel, error) {
	a := cpu.NewAsm(modelText)
	cpu.RedZoneProgram(a)
	code, err := a.Assemble()
	if err != nil {
		return nil, err
	}
	k := &designKernel{opt: opt, mach: kernel.NewMachine(1)}
	u, err := uprobes.New(k.mach, uprobes.Config{Flavor: uprobes.TasksTrace, Optimize: opt})
	if err != nil {
		k.mach.Stop()
		return nil, err
	}
	in := experiment.ModelFile("/usr/bin/redzone", code)
	if k.task, err = experiment.ModelProcess("redzone", u, mm.Open(in), modelText, modelStack, 4*pgtable.PageSize); err != nil {
		k.mach.Stop()
		return nil, err
	}
	k.entry, _ = a.Addr("redzone_loop")
	site, _ := a.Addr("redzone_nop5")
	if bare {
		return k, nil
	}
	c := &uprobes.Consumer{Handler: func(*kernel.Runner) int { k.hits.Add(1); return 0 }}
	if _, err := u.Register(nil, in, site-modelText, c); err != nil {
		k.mach.Stop()
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
	r := k.mach.Start(k.task, 0, 0, func(r *kernel.Runner) {
		r.Regs = cpu.Regs{RIP: k.entry}
		r.Regs.R[cpu.RSP], r.Regs.R[cpu.RCX] = modelStack-64, uint64(n)
		el = elapsed(func() { stop = r.Run() })
		regs = r.Regs
	})
	<-r.Done()
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
	env.Param("model_clock", clockName())
	var ks []*designKernel
	defer func() {
		for _, k := range ks {
			k.mach.Stop()
		}
	}()
	for i, v := range append([]string{uprobes.OptimizeOff.String()}, env.Variants...) {
		opt, err := uprobes.ParseOptimize(v)
		if err != nil {
			return err
		}
		k, err := newDesignKernel(opt, i == 0)
		if err != nil {
			return err
		}
		ks = append(ks, k)
		if _, err := k.run(o.Calls); err != nil {
			return err
		}
	}
	rates := make([][]float64, len(ks))
	hitNs := make([][]float64, len(ks))
	for range o.Samples {
		var base time.Duration
		for i, k := range ks {
			if err := ctx.Err(); err != nil {
				return err
			}
			h0 := k.hits.Load()
			el, err := k.run(o.Calls)
			if err != nil {
				return err
			}
			if i == 0 {
				base = el
				continue
			}
			rates[i] = append(rates[i], float64(k.hits.Load()-h0)/el.Seconds())
			hitNs[i] = append(hitNs[i], float64(el-base)/float64(o.Calls))
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
		if h := k.hits.Load(); h != k.calls {
			return fmt.Errorf("redzone %v: %d hits for %d calls", k.opt, h, k.calls)
		}
		r := NewResult(experiment.Row{Target: experiment.Model, Variant: k.opt.String()}, AttachModel, SiteNop5,
			rates[i], k.calls, k.hits.Load(), k.corrupted, k.mask)
		r.HitNs, r.HitNsStddev = report.MeanStddev(hitNs[i])
		if off >= 0 && i != off {
			// The rates' ratio pair by pair; the costs' as the ratio of
			// the means (a sample's cost is a difference, near 0 for a
			// cheap design, so the pairs' ratios scatter).
			offNs, offSd := report.MeanStddev(hitNs[off])
			v := &VsInt3{HitNsRatio: r.HitNs / offNs}
			v.HitNsRatioStddev = math.Abs(v.HitNsRatio) * math.Hypot(r.HitNsStddev/r.HitNs, offSd/offNs)
			v.Ratio, v.RatioStddev = report.MeanStddev(pairRatios(rates[i], rates[off]))
			r.VsInt3 = v
		}
		env.Progress("%s: %.3f M hits/s, %.0f ns per hit, %d of %d calls found %s changed", k.opt, r.Mops, r.HitNs, r.Corrupted, r.Calls, Slots(r.Mask))
		emit(r)
	}
	return nil
}

// elapsed runs fn and returns the calling thread's CPU time it took, or
// the wall time where the OS gives no thread clock.
func elapsed(fn func()) time.Duration {
	c0, ok := experiment.ThreadCPUTime()
	t0 := time.Now()
	fn()
	if c1, _ := experiment.ThreadCPUTime(); ok {
		return c1 - c0
	}
	return time.Since(t0)
}

// clockName says which clock the rates use.
func clockName() string {
	if _, ok := experiment.ThreadCPUTime(); ok {
		return "thread-cpu"
	}
	return "wall"
}

// pairRatios returns a[i]/b[i] for the sample pairs.
func pairRatios(a, b []float64) []float64 {
	var out []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			out = append(out, a[i]/b[i])
		}
	}
	return out
}
