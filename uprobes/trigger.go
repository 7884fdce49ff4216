package uprobes

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"mmlab/cpu"
	"mmlab/kernel"
	"mmlab/mm"
	"mmlab/mm/pgtable"
)

// The trigger cases (the kernel's bench trig-*; the same names as the live
// harness).
const (
	CaseNop          = "nop"           // no probe: the loop's own speed, calls/s
	CaseUprobeNop    = "uprobe-nop"    // uprobe on a nop (emulated)
	CaseUretprobeNop = "uretprobe-nop" // uretprobe on the nop function
	CaseUprobeRet    = "uprobe-ret"    // uprobe on a ret (single-stepped out of line)
	CaseUprobeNop5   = "uprobe-nop5"   // uprobe on a 5-byte nop (emulated; not optimized in the model)
)

// TriggerConfig is one model trigger measurement.
type TriggerConfig struct {
	Case string
	// CPUs producers, producer i a thread of one process on model CPU i.
	CPUs int
	// Flavors are measured in turn, sample by sample, each on its own
	// model kernel, so that all see the same machine (default: SRCU and
	// TasksTrace).
	Flavors []string
	// Warmup runs once per flavour before the first sample; then one
	// sample of Interval per flavour in turn until Duration is covered.
	Warmup, Duration, Interval time.Duration
}

// TriggerResult is one flavour's measurement.
type TriggerResult struct {
	Flavor  string
	Samples []float64 // hits per second (calls per second for CaseNop), one per interval
	// CPUSamples are the same rates per producer CPU-second times the
	// producers: what CPUs producers with a host core each would do. The
	// figure a busy host distorts least; nil where the OS has no
	// per-thread CPU clock.
	CPUSamples []float64
	Calls      int64 // calls of the target in the samples
	Hits       int64 // handler (or ret_handler) calls in the samples
}

// triggerBatch is how many calls a producer makes between two looks at
// the clock.
const triggerBatch = 4096

// triggerKernel is one flavour's model kernel for the trigger benchmark.
type triggerKernel struct {
	flavor string
	mach   *kernel.Machine
	u      *Uprobes
	leader *kernel.Task
	tasks  []*kernel.Task // one thread per CPU, leader first
	entry  uint64
	hits   []paddedCount // per model CPU
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

const (
	triggerText  = 0x400000
	triggerStack = 0x7ff000000000 // thread i's stack ends i*16 pages below
)

func newTriggerKernel(c TriggerConfig, flavor string) (*triggerKernel, error) {
	a := cpu.NewAsm(triggerText)
	triggerProg(a)
	code, err := a.Assemble()
	if err != nil {
		return nil, err
	}
	k := &triggerKernel{flavor: flavor, mach: kernel.NewMachine(c.CPUs), hits: make([]paddedCount, c.CPUs)}
	if k.u, err = New(k.mach, flavor); err != nil {
		return nil, err
	}
	in := mm.NewInode("/usr/bin/trigger", uint64(len(code)), func(off uint64) byte { return code[off] })
	k.leader = kernel.NewTaskMM("trigger")
	m := k.leader.MM
	m.Hooks = k.u
	if _, err := m.Mmap(nil, triggerText, uint64(len(code)), mm.PROT_READ|mm.PROT_EXEC, mm.MAP_PRIVATE|mm.MAP_FIXED, mm.Open(in), 0); err != nil {
		return nil, err
	}
	k.tasks = []*kernel.Task{k.leader}
	for len(k.tasks) < c.CPUs {
		k.tasks = append(k.tasks, k.leader.NewThread())
	}
	const stackPages = 16
	if _, err := m.Mmap(nil, triggerStack-uint64(c.CPUs)*stackPages*pgtable.PageSize, uint64(c.CPUs)*stackPages*pgtable.PageSize,
		mm.PROT_READ|mm.PROT_WRITE, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED, nil, 0); err != nil {
		return nil, err
	}
	label, ret := "target", false
	k.entry, _ = a.Addr("loop")
	switch c.Case {
	case CaseNop:
		return k, nil
	case CaseUprobeNop:
	case CaseUretprobeNop:
		ret = true
	case CaseUprobeRet:
		label = "target_ret"
	case CaseUprobeNop5:
		label = "target5"
		k.entry, _ = a.Addr("loop5")
	default:
		return nil, fmt.Errorf("uprobes: unknown trigger case %q", c.Case)
	}
	cons := &Consumer{}
	count := func(r *kernel.Runner) { k.hits[r.Task.Thread.CPU()].n.Add(1) }
	if ret {
		cons.RetHandler = func(_ uint64, r *kernel.Runner) { count(r) }
	} else {
		cons.Handler = func(r *kernel.Runner) int { count(r); return 0 }
	}
	addr, _ := a.Addr(label)
	if _, err := k.u.Register(nil, in, addr-triggerText, cons); err != nil {
		return nil, fmt.Errorf("uprobes: trigger %s: register: %w", c.Case, err)
	}
	return k, nil
}

// sample runs the producers for d and returns calls, hits, the wall time
// and the producers' summed thread CPU time (0 if unknown).
func (k *triggerKernel) sample(d time.Duration) (calls, hits int64, elapsed, cpuTime time.Duration, err error) {
	var total, cpuNs atomic.Int64
	errs := make(chan error, len(k.tasks))
	h0 := k.totalHits()
	start := time.Now()
	deadline := start.Add(d)
	var runners []*kernel.Runner
	for i, t := range k.tasks {
		runners = append(runners, k.mach.Start(t, i, 0, func(r *kernel.Runner) {
			sp := triggerStack - uint64(i)*16*pgtable.PageSize - 64
			n := int64(0)
			t0, ok := threadCPUTime()
			for time.Now().Before(deadline) {
				r.Regs = cpu.Regs{RIP: k.entry}
				r.Regs.R[cpu.RSP], r.Regs.R[cpu.RCX] = sp, triggerBatch
				if s := r.Run(); s.Reason != cpu.StopHalt {
					errs <- fmt.Errorf("%v: %v, regs %v, signals %v", r, s, &r.Regs, r.Task.PendingSignals())
					break
				}
				n += triggerBatch
			}
			if t1, _ := threadCPUTime(); ok {
				cpuNs.Add(int64(t1 - t0))
			}
			total.Add(n)
		}))
	}
	for _, r := range runners {
		<-r.Done()
	}
	elapsed = time.Since(start)
	select {
	case err = <-errs:
	default:
	}
	return total.Load(), k.totalHits() - h0, elapsed, time.Duration(cpuNs.Load()), err
}

func (k *triggerKernel) totalHits() int64 {
	var n int64
	for i := range k.hits {
		n += k.hits[i].n.Load()
	}
	return n
}

// Trigger runs the model trigger benchmark: c.CPUs threads of one process,
// each on its own model CPU, call a target in a tight loop; a consumer
// counts hits. The flavours are sampled in turn.
func Trigger(ctx context.Context, c TriggerConfig) ([]TriggerResult, error) {
	if len(c.Flavors) == 0 {
		c.Flavors = []string{SRCU, TasksTrace}
	}
	if c.CPUs < 1 || c.Interval <= 0 {
		return nil, fmt.Errorf("uprobes: trigger: bad config %+v", c)
	}
	var ks []*triggerKernel
	defer func() {
		for _, k := range ks {
			k.mach.Stop()
		}
	}()
	res := make([]TriggerResult, len(c.Flavors))
	for i, fl := range c.Flavors {
		k, err := newTriggerKernel(c, fl)
		if err != nil {
			return nil, err
		}
		ks = append(ks, k)
		res[i].Flavor = fl
		if _, _, _, _, err := k.sample(c.Warmup); err != nil {
			return nil, err
		}
	}
	nsamples := max(1, int(c.Duration/c.Interval))
	for range nsamples {
		for i, k := range ks {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			calls, hits, el, cpuTime, err := k.sample(c.Interval)
			if err != nil {
				return nil, err
			}
			n := hits
			if c.Case == CaseNop {
				n = calls
			}
			res[i].Samples = append(res[i].Samples, float64(n)/el.Seconds())
			if cpuTime > 0 {
				res[i].CPUSamples = append(res[i].CPUSamples, float64(n)*float64(c.CPUs)/cpuTime.Seconds())
			}
			res[i].Calls += calls
			res[i].Hits += hits
		}
	}
	for _, r := range res {
		if c.Case != CaseNop && r.Hits != r.Calls {
			return res, fmt.Errorf("uprobes: trigger %s %s: %d hits for %d calls", c.Case, r.Flavor, r.Hits, r.Calls)
		}
	}
	return res, nil
}
