package trigger

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"mmlab/binfmt"
	"mmlab/cpu"
	"mmlab/experiment"
	"mmlab/host"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/report"
	"mmlab/sched"
	"mmlab/smp"
	"mmlab/uprobes"
)

// modelConfig is one model trigger measurement.
type modelConfig struct {
	// Machine is the machine the model kernels run on.
	Machine machine.Description
	// Sim, if set, makes every kernel a simulated machine's.
	Sim  *kernel.Sim
	Case Case
	// CPUs producers, producer i a thread of one process on model CPU i.
	CPUs int
	// Variants are measured in turn, sample by sample, each on its own
	// model kernel, so that all see the same machine.
	Variants []uprobes.Variant
	// Warmup runs once per flavour before the first sample; then Samples
	// samples of Interval per flavour in turn.
	Warmup, Interval time.Duration
	Samples          int
	// C2C takes each sim kernel's contention profile (smp.C2C).
	C2C bool
}

// modelResult is one variant's measurement.
type modelResult struct {
	Variant  string
	Optimize uprobes.Optimize
	Samples  []float64 // hits per second (calls per second without a probe), one per interval
	// CPUSamples are the same rates per producer CPU-second times the
	// producers: what CPUs producers with a host core each would do. The
	// figure a busy host distorts least; nil where the OS has no
	// per-thread CPU clock.
	CPUSamples []float64
	Calls      uint64 // calls of the target in the samples
	Hits       uint64 // handler (or ret_handler) calls in the samples
	C2C        *C2C   // the sim kernel's contention profile, if asked
}

// triggerBatch is how many calls a producer makes between two looks at
// the clock; simBatch on a simulated machine, where a look costs nothing
// and a sample must end near its interval's end: at 80 producers a call
// takes some 23 µs of virtual time, and every producer's 4096 calls
// would outlast a 10 ms sample several times over.
const (
	triggerBatch = 4096
	simBatch     = 16
)

// triggerKernel is one variant's model kernel for the trigger benchmark.
type triggerKernel struct {
	*binfmt.Kernel
	tasks []*kernel.Task // one thread of one process per CPU, leader first
	entry uint64
	hits  []paddedCount // per model CPU
	calls uint64        // of the target, in every sample and warm-up so far
	batch uint64        // triggerBatch, or simBatch on a simulated machine
}

type paddedCount struct {
	n atomic.Int64
	_ [56]byte
}

// triggerProg is the producer loop and its targets.
func triggerProg(a *cpu.Asm) {
	a.Label("loop").Call("target").Dec32(cpu.RCX).Jnz("loop").Hlt()
	a.Label("loop5").Call("target5").Dec32(cpu.RCX).Jnz("loop5").Hlt()
	a.Label("target").Nop().Label("target_ret").Ret()
	a.Label("target5").Nop5().Ret()
}

func newTriggerKernel(c modelConfig, v uprobes.Variant) (*triggerKernel, error) {
	mk, err := binfmt.NewKernelFor(c.Machine, c.CPUs, host.Threads{}, c.Sim, v.Config)
	if err != nil {
		return nil, err
	}
	p, err := binfmt.NewProgram(&mk.Machine.NS.MM, "/usr/bin/trigger", triggerProg)
	if err != nil {
		mk.Stop()
		return nil, err
	}
	k := &triggerKernel{Kernel: mk, hits: make([]paddedCount, c.CPUs), batch: triggerBatch}
	if c.Sim != nil {
		k.batch = simBatch
	}
	leader, err := k.Process("trigger", p, c.CPUs)
	if err != nil {
		k.Stop()
		return nil, err
	}
	k.tasks = []*kernel.Task{leader}
	for len(k.tasks) < c.CPUs {
		k.tasks = append(k.tasks, leader.NewThread())
	}
	label := "target"
	k.entry = p.Addr("loop")
	switch c.Case.Target {
	case TargetRet:
		label = "target_ret"
	case TargetNop5:
		label = "target5"
		k.entry = p.Addr("loop5")
	}
	if !c.Case.Probed {
		return k, nil
	}
	cons := &uprobes.Consumer{}
	count := func(r *kernel.Runner) { k.hits[r.Task.Thread.CPU()].n.Add(1) }
	if c.Case.Ret {
		cons.RetHandler = func(_ uint64, r *kernel.Runner) { count(r) }
	} else {
		cons.Handler = func(r *kernel.Runner) int { count(r); return 0 }
	}
	if _, err := k.Probe(p, label, cons); err != nil {
		k.Stop()
		return nil, fmt.Errorf("trigger %s: register: %w", c.Case.Name, err)
	}
	return k, nil
}

// sample runs the producers for d (each at least one batch), or until ctx
// is done, and returns calls, hits, the wall time and the producers' summed
// thread CPU time (0 if unknown): on the model's clock (sched.Now), the
// host's in real time and the virtual one on a simulated machine.
func (k *triggerKernel) sample(ctx context.Context, d time.Duration) (calls, hits uint64, elapsed, cpuTime time.Duration, err error) {
	var total, cpuNs atomic.Int64
	errs := make(chan error, len(k.tasks))
	h0 := k.totalHits()
	start := sched.Now()
	deadline := start.Add(d)
	var runners []*kernel.Runner
	for i, t := range k.tasks {
		runners = append(runners, k.Machine.Start(t, i, 0, func(r *kernel.Runner) {
			n := int64(0)
			t0, ok := k.ThreadCPUTime()
			// At least one batch, so that a producer started late on a
			// busy host still gives the sample a rate.
			for first := true; first || sched.Now().Before(deadline) && ctx.Err() == nil; first = false {
				if s := binfmt.Loop(r, i, k.entry, k.batch); s.Reason != cpu.StopHalt {
					errs <- fmt.Errorf("%v: %v, regs %v, signals %v", r, s, &r.Regs, r.Task.PendingSignals())
					break
				}
				n += int64(k.batch)
			}
			if t1, _ := k.ThreadCPUTime(); ok {
				cpuNs.Add(int64(t1 - t0))
			}
			total.Add(n)
		}))
	}
	for _, r := range runners {
		r.Wait()
	}
	elapsed = sched.Since(start)
	k.calls += uint64(total.Load())
	select {
	case err = <-errs:
	default:
	}
	return uint64(total.Load()), k.totalHits() - h0, elapsed, time.Duration(cpuNs.Load()), err
}

func (k *triggerKernel) totalHits() uint64 {
	var n uint64
	for i := range k.hits {
		n += uint64(k.hits[i].n.Load())
	}
	return n
}

// measure runs the model trigger benchmark: c.CPUs threads of one process,
// each on its own model CPU, call a target in a tight loop; a consumer
// counts hits. The flavours are sampled in turn; on simulated machines
// each kernel takes its samples in its own run (Machine.Main) instead, one
// kernel after the other, as nothing of the host comes between them.
func measure(ctx context.Context, c modelConfig) ([]modelResult, error) {
	if c.Sim != nil {
		return measureSim(ctx, c)
	}
	var ks []*triggerKernel
	res := make([]modelResult, len(c.Variants))
	for i, v := range c.Variants {
		k, err := newTriggerKernel(c, v)
		if err != nil {
			return nil, err
		}
		defer k.Stop()
		ks = append(ks, k)
		res[i].Variant, res[i].Optimize = v.Name, v.Config.Optimize
		if _, _, _, _, err := k.sample(ctx, c.Warmup); err != nil {
			return nil, err
		}
	}
	for range c.Samples {
		for i, k := range ks {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if err := k.addSample(ctx, c, &res[i]); err != nil {
				return nil, err
			}
		}
	}
	return checked(ctx, c, res)
}

// measureSim is measure on simulated machines.
func measureSim(ctx context.Context, c modelConfig) ([]modelResult, error) {
	res := make([]modelResult, len(c.Variants))
	for i, v := range c.Variants {
		k, err := newTriggerKernel(c, v)
		if err != nil {
			return nil, err
		}
		res[i].Variant, res[i].Optimize = v.Name, v.Config.Optimize
		err = k.Main("bench", func() error {
			if _, _, _, _, err := k.sample(ctx, c.Warmup); err != nil {
				return err
			}
			for range c.Samples {
				if err := ctx.Err(); err != nil {
					return err
				}
				if err := k.addSample(ctx, c, &res[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil && c.C2C {
			ops := k.totalHits()
			if !c.Case.Probed {
				ops = k.calls
			}
			res[i].C2C = &C2C{Ops: ops, Profile: smp.C2C(k.Machine.Sys)}
		}
		k.Stop()
		if err != nil {
			return nil, err
		}
	}
	return checked(ctx, c, res)
}

// addSample takes one sample of c.Interval into r.
func (k *triggerKernel) addSample(ctx context.Context, c modelConfig, r *modelResult) error {
	calls, hits, el, cpuTime, err := k.sample(ctx, c.Interval)
	if err != nil {
		return err
	}
	n := hits
	if !c.Case.Probed {
		n = calls
	}
	r.Samples = append(r.Samples, float64(n)/el.Seconds())
	if cpuTime > 0 {
		r.CPUSamples = append(r.CPUSamples, float64(n)*float64(c.CPUs)/cpuTime.Seconds())
	}
	r.Calls += calls
	r.Hits += hits
	return nil
}

// checked ends a measurement: ctx's error, or a probed case's hits that
// do not match its calls.
func checked(ctx context.Context, c modelConfig, res []modelResult) ([]modelResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, r := range res {
		if c.Case.Probed && r.Hits != r.Calls {
			return res, fmt.Errorf("trigger %s %s: %d hits for %d calls", c.Case.Name, r.Variant, r.Hits, r.Calls)
		}
	}
	return res, nil
}

// RunModel runs every case at every producer count on one model kernel per
// variant, the variants sampled in turn, and emits the results grouped by
// variant when it ends (also when it fails or is interrupted: what
// finished).
func RunModel(ctx context.Context, o *Options, env experiment.Env, emit func(Result)) error {
	named, err := uprobes.ParseVariants(env.Variants)
	if err != nil {
		return err
	}
	// A kernel per optimization and variant.
	var variants []uprobes.Variant
	for _, name := range o.Optimize {
		for _, v := range named {
			if name != OptimizeKernel {
				if v.Config.Optimize, err = uprobes.Optimizations.Parse(name); err != nil {
					return err
				}
			}
			if !slices.ContainsFunc(variants, func(w uprobes.Variant) bool { return w.Name == v.Name && w.Config.Optimize == v.Config.Optimize }) {
				variants = append(variants, v)
			}
		}
	}
	type kernelKey struct {
		variant string
		opt     uprobes.Optimize
	}
	byVariant := map[kernelKey][]Result{}
	defer func() {
		for _, v := range variants {
			for _, r := range byVariant[kernelKey{v.Name, v.Config.Optimize}] {
				emit(r)
			}
		}
	}()
	for _, name := range o.Cases {
		c, _ := LookupCase(name)
		for _, n := range o.CPUs {
			mc := modelConfig{Machine: env.Machine, Case: c, CPUs: n, Variants: variants,
				Warmup: o.Warmup.D(), Interval: o.Interval.D(), Samples: o.Samples(), C2C: o.profiled(n) && env.Sim != nil}
			if env.Sim != nil {
				mc.Sim = &kernel.Sim{Seed: env.Sim.Seed, Until: env.Sim.Until}
			}
			res, err := measure(ctx, mc)
			if err != nil {
				return fmt.Errorf("%s %d cpus: %w", name, n, err)
			}
			srcus := map[uprobes.Optimize]*modelResult{}
			for i := range res {
				if res[i].Variant == uprobes.SRCU.String() {
					srcus[res[i].Optimize] = &res[i]
				}
			}
			for _, mr := range res {
				// The srcu kernel of the same optimization, or the one
				// srcu kernel (--optimize kernel: v6.12 has none).
				srcu := srcus[mr.Optimize]
				if srcu == nil && len(srcus) == 1 {
					for _, s := range srcus {
						srcu = s
					}
				}
				r := NewResult(env.Row(mr.Variant), AttachModel, name, n, mr.Samples, mr.Calls, mr.Hits)
				r.Optimize = mr.Optimize.String()
				r.C2C = mr.C2C
				if len(mr.CPUSamples) > 0 {
					p := &PerCPU{MopsCPURuns: scale(mr.CPUSamples, 1e-6)}
					p.MopsCPU, p.MopsCPUStddev = report.MeanStddev(p.MopsCPURuns)
					r.PerCPU = p
				}
				if srcu != nil && mr.Variant != srcu.Variant {
					// Paired samples (taken in turn): the ratio of each pair.
					v := &VsSRCU{}
					v.RatioVsSRCU, v.RatioVsSRCUStddev = report.PairRatios(mr.Samples, srcu.Samples)
					r.VsSRCU = v
					if len(mr.CPUSamples) > 0 && len(srcu.CPUSamples) > 0 {
						cv := &CPUVsSRCU{}
						cv.RatioCPUVsSRCU, cv.RatioCPUVsSRCUStddev = report.PairRatios(mr.CPUSamples, srcu.CPUSamples)
						r.CPUVsSRCU = cv
					}
				}
				key := kernelKey{mr.Variant, mr.Optimize}
				byVariant[key] = append(byVariant[key], r)
			}
		}
	}
	if env.Sim == nil { // a simulated run reads nothing of the host
		NoteLoad(o, env)
	}
	return nil
}
