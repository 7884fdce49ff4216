package attach

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"mmlab/binfmt"
	"mmlab/cpu"
	"mmlab/experiment"
	"mmlab/host"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/sched"
	"mmlab/uapi"
	"mmlab/uprobes"
)

// modelConfig is one model attach/detach measurement.
type modelConfig struct {
	// Machine is the machine the model kernels run on.
	Machine machine.Description
	// Sim, if set, makes every kernel a simulated machine's (measureSim).
	Sim *kernel.Sim
	// Variants are measured in turn, run by run, each on its own model
	// kernel, so that all see the same machine.
	Variants []uprobes.Variant
	Modes    []string // uapi.AttachMulti, uapi.AttachPerf
	Ns       []int    // probes per attach, at most MaxProbes
	Runs     int
	Gap      time.Duration // pause before each attach
	// Procs processes map the file; the first CPUs of them (one per model
	// CPU) run a loop through the probed sled meanwhile, so grace periods
	// meet running readers.
	Procs, CPUs int
}

// modelRun is one attach and detach, and the first-hit measurement after
// it.
type modelRun struct {
	Variant        string
	Mode           string
	N              int
	Attach, Detach time.Duration
	// First is the hitter's first call of the probed nop5 target, Hit its
	// later calls' mean; Optimized says whether the first hit left the
	// site a call into a trampoline.
	First, Hit time.Duration
	Optimized  bool
}

// measure attaches and detaches N uprobes on a file that c.Procs model
// processes map, c.Runs times round-robin over counts and modes, and
// returns each run. Attach is the N registrations; detach is every
// UnregisterNosync and the UnregisterSync calls of the mode (the flavour's
// grace period: the writer-side price of Tasks Trace).
func measure(ctx context.Context, c modelConfig) ([]modelRun, error) {
	if c.Sim != nil {
		return measureSim(ctx, c)
	}
	var ks []*modelKernel
	for _, v := range c.Variants {
		k, err := attachKernel(c, v)
		if k != nil {
			defer k.stop()
			ks = append(ks, k)
		}
		if err != nil {
			return nil, err
		}
	}
	var out []modelRun
	for range c.Runs {
		for _, n := range c.Ns {
			for _, mode := range c.Modes {
				if err := ctx.Err(); err != nil {
					return out, err
				}
				for i, k := range ks {
					if err := experiment.Sleep(ctx, c.Gap); err != nil {
						return out, err
					}
					k.run(true)
					run, err := attachOnce(k.Uprobes, k.sled.File, k.sled.Offset("sled"), mode, n, 0)
					k.run(false)
					if err != nil {
						return out, err
					}
					if run.First, run.Hit, run.Optimized, err = k.firstHit(); err != nil {
						return out, err
					}
					run.Variant = c.Variants[i].Name
					out = append(out, run)
				}
			}
		}
	}
	return out, nil
}

// modelKernel is one variant's model kernel for measure.
type modelKernel struct {
	*binfmt.Kernel
	sled *binfmt.Program // the probed sled of nops, its loop
	// hitter is a process of its own that maps a program of its own,
	// hitProg, and calls its nop5 target through its loop hit5; it runs on
	// model CPU 0 while the mappers are parked. The sled's probes never
	// visit it, nor the nop5 probe the mappers.
	hitter  *kernel.Task
	hitProg *binfmt.Program
	hitCPU  int // the model CPU it runs on: 0, or simHitCPU (simAttachKernel)
	// run lets the mappers loop (true, returning once each has begun a
	// loop) or parks them (false): they run only while their kernel is
	// measured, so that the kernels measured in turn do not share the
	// host's CPUs with each other's mappers. Both are attachKernel's; a
	// simulated machine's mappers are simMappers.
	run  func(bool)
	stop func() // ends the kernel
}

// attachKernel is one variant's model kernel for measure: a sled of nops
// in a file that c.Procs processes map, the first c.CPUs of them running a
// loop through it while the kernel runs (modelKernel.run). On error the
// kernel returned, if any, is to be stopped.
func attachKernel(c modelConfig, v uprobes.Variant) (*modelKernel, error) {
	mk, err := binfmt.NewKernel(c.Machine, max(1, c.CPUs), host.Threads{}, v.Config)
	if err != nil {
		return nil, err
	}
	k, err := newModelKernel(mk)
	if err != nil {
		return nil, err
	}
	var stopping, running atomic.Bool
	running.Store(true) // until every mapper has started
	var wakeMu sync.Mutex
	wake := make(chan struct{}) // closed and replaced when running is set
	var runners []*kernel.Runner
	var loops atomic.Int64 // loops begun by the mappers
	k.run = func(on bool) {
		n := loops.Load()
		running.Store(on)
		if !on {
			return
		}
		wakeMu.Lock()
		close(wake)
		wake = make(chan struct{})
		wakeMu.Unlock()
		for !stopping.Load() && loops.Load() < n+int64(len(runners)) {
			runtime.Gosched()
		}
	}
	k.stop = func() {
		stopping.Store(true)
		k.run(true)
		for _, r := range runners {
			<-r.Done()
		}
		k.Stop()
	}
	if k.hitter, err = k.Process("hitter", k.hitProg, 1); err != nil {
		return k, err
	}
	for i := range c.Procs {
		t, err := k.Process(fmt.Sprint("mapper", i), k.sled, 1)
		if err != nil {
			return k, err
		}
		if i >= c.CPUs {
			continue
		}
		started := make(chan struct{})
		var once sync.Once
		runners = append(runners, k.Machine.Start(t, i, 0, func(r *kernel.Runner) {
			defer once.Do(func() { close(started) })
			for n := 0; !stopping.Load(); n++ {
				if n == 1 {
					once.Do(func() { close(started) })
				}
				if !running.Load() {
					wakeMu.Lock()
					ch := wake
					wakeMu.Unlock()
					if !running.Load() {
						r.Block(func() { <-ch })
					}
					continue
				}
				loops.Add(1)
				if s := binfmt.Loop(r, 0, k.sled.Addr("loop"), 256); s.Reason != cpu.StopHalt {
					return
				}
			}
		}))
		<-started // the mapper runs through the sled
	}
	k.run(false)
	return k, nil
}

// newModelKernel returns a modelKernel of mk with its programs, the sled
// and the hitter's, in files of mk (neither process, nor run and stop,
// set); on error mk is stopped.
func newModelKernel(mk *binfmt.Kernel) (*modelKernel, error) {
	sled, err := binfmt.NewProgram(&mk.Machine.NS.MM, "/usr/lib/libsled.so", func(a *cpu.Asm) {
		a.Label("loop").Call("sled").Dec32(cpu.RCX).Jnz("loop").Hlt()
		a.Label("sled")
		for range MaxProbes {
			a.Nop()
		}
		a.Ret()
	})
	if err != nil {
		mk.Stop()
		return nil, err
	}
	hit, err := binfmt.NewProgram(&mk.Machine.NS.MM, "/usr/bin/hitter", func(a *cpu.Asm) {
		a.Label("hit5").Call("nop5").Dec32(cpu.RCX).Jnz("hit5").Hlt()
		a.Label("nop5").Nop5().Ret()
	})
	if err != nil {
		mk.Stop()
		return nil, err
	}
	return &modelKernel{Kernel: mk, sled: sled, hitProg: hit}, nil
}

// attachOnce times one attach of n probes and its detach, on the model's
// clock (sched.Now: the host's, or a simulated machine's). On a simulated
// machine each system call of the live side's attach and detach pays its
// entry and exit (syscalls), and each registration registerWork (nothing
// in real time).
func attachOnce(u *uprobes.Uprobes, in *mm.Inode, base uint64, mode string, n int, registerWork time.Duration) (modelRun, error) {
	run := modelRun{Mode: mode, N: n}
	var hits atomic.Int64
	ups := make([]*uprobes.Uprobe, n)
	cons := make([]*uprobes.Consumer, n)
	link, perProbe := syscalls(mode)
	start := sched.Now()
	sched.ChargeCost(sched.CostSyscall, link)
	for i := range n {
		sched.ChargeCost(sched.CostSyscall, perProbe)
		sched.Charge(registerWork)
		cons[i] = &uprobes.Consumer{Handler: func(*kernel.Runner) int { hits.Add(1); return 0 }}
		up, err := u.Register(nil, in, base+uint64(i), cons[i])
		if err != nil {
			return run, err
		}
		ups[i] = up
	}
	run.Attach = sched.Since(start)
	start = sched.Now()
	sched.ChargeCost(sched.CostSyscall, link)
	for i := range n {
		sched.ChargeCost(sched.CostSyscall, perProbe)
		if err := u.UnregisterNosync(nil, ups[i], cons[i]); err != nil {
			return run, err
		}
		if mode == uapi.AttachPerf {
			u.UnregisterSync(nil)
		}
	}
	if mode != uapi.AttachPerf {
		u.UnregisterSync(nil)
	}
	run.Detach = sched.Since(start)
	return run, nil
}

// syscalls returns the system calls of an attach (and as many of its
// detach) in mode as the live side makes them through cilium/ebpf: once
// per link and once per probe. uprobe_multi is one bpf(BPF_LINK_CREATE)
// for all the probes, closed once; perf is per probe a perf_event_open and
// the link that attaches the program to it, each closed on detach.
func syscalls(mode string) (link, perProbe int) {
	if mode == uapi.AttachPerf {
		return 0, 2
	}
	return 1, 0
}

// firstHit registers a uprobe on the nop5 target and times the hitter's
// first call after it, whose hit optimizes the site (arch_uprobe_optimize:
// the mmap write lock, a trampoline found or mapped, the checked text
// writes with their syncs), and the mean of its next LaterHits calls (the
// optimized path: call, trampoline, uprobe syscall), then unregisters it.
// optimized reports whether the first hit left the site a call into one
// of the hitter's trampolines. The hitter keeps its trampoline after the
// removal, as every mm does, so only the first measurement of a kernel
// maps one.
func (k *modelKernel) firstHit() (first, hit time.Duration, optimized bool, err error) {
	con := binfmt.NewCounter()
	up, err := k.Probe(k.hitProg, "nop5", &con.Consumer)
	if err != nil {
		return 0, 0, false, err
	}
	ds, err := k.hit([]int{1, LaterHits}, func(i int) {
		if i == 0 {
			optimized = k.siteOptimized()
		}
	})
	if err == nil && con.Hits() != 1+LaterHits {
		err = fmt.Errorf("attach: %d hits of the nop5 probe for %d calls", con.Hits(), 1+LaterHits)
	}
	if uerr := k.Uprobes.UnregisterNosync(nil, up, &con.Consumer); err == nil {
		err = uerr
	}
	k.Uprobes.UnregisterSync(nil)
	if err != nil {
		return 0, 0, false, err
	}
	return ds[0], ds[1] / LaterHits, optimized, nil
}

// hit runs the hitter on model CPU 0, one thread for all of ns as a live
// process's thread would: ns[i] calls of the nop5 target, timed, then
// after(i) on the hitter's thread between two runs of its code. It returns
// how long each ns[i] calls took.
func (k *modelKernel) hit(ns []int, after func(i int)) ([]time.Duration, error) {
	var ds []time.Duration
	var stop cpu.Stop
	r := k.Machine.Start(k.hitter, k.hitCPU, 0, func(r *kernel.Runner) {
		for i, n := range ns {
			start := sched.Now()
			stop = binfmt.Loop(r, 0, k.hitProg.Addr("hit5"), uint64(n))
			ds = append(ds, sched.Since(start))
			if stop.Reason != cpu.StopHalt {
				return
			}
			after(i)
		}
	})
	r.Wait()
	if stop.Reason != cpu.StopHalt {
		return ds, fmt.Errorf("attach: the hitter stopped: %v", stop)
	}
	return ds, nil
}

// site returns the 5 bytes of the hitter's nop5 site, as the hitter would
// read them (the file's where no page is mapped); called while the hitter
// does not run its code, so nothing changes them meanwhile.
func (k *modelKernel) site() [5]byte {
	m := k.hitter.MM
	var b [5]byte
	for i := range b {
		at := k.hitProg.Addr("nop5") + uint64(i)
		var ok bool
		if b[i], ok = m.PeekByte(at); !ok {
			b[i], _ = m.FindVMA(at).FileByte(at)
		}
	}
	return b
}

// siteOptimized reports whether the hitter's nop5 site is a call into one
// of its trampolines.
func (k *modelKernel) siteOptimized() bool {
	b := k.site()
	dest := k.hitProg.Addr("nop5") + 5 + uint64(int64(int32(binary.LittleEndian.Uint32(b[1:]))))
	return b[0] == 0xe8 && slices.Contains(k.Uprobes.Trampolines(k.hitter.MM), dest)
}

// The model's processes: modelProcs map the sled, modelCPUs of them run
// through it, on as many model CPUs (the host's other core stays free for
// the attaching task).
const modelProcs, modelCPUs = 4, 1

// RunModel measures every mode and count on one model kernel per variant,
// the variants in turn run by run, and emits one result per (variant, mode,
// n).
func RunModel(ctx context.Context, o *Options, env experiment.Env, emit func(Result)) error {
	variants, err := uprobes.ParseVariants(env.Variants)
	if err != nil {
		return err
	}
	o.ModelProcs, o.ModelCPUs = modelProcs, modelCPUs
	c := modelConfig{Machine: env.Machine, Variants: variants, Modes: o.Attach, Ns: o.N,
		Runs: o.Runs, Gap: o.Gap.D(), Procs: modelProcs, CPUs: modelCPUs}
	if env.Sim != nil {
		c.Sim = &kernel.Sim{Seed: env.Sim.Seed, Until: env.Sim.Until}
	}
	runs, err := measure(ctx, c)
	if err != nil {
		return err
	}
	for _, v := range variants {
		for _, n := range o.N {
			for _, m := range o.Attach {
				var at, de, first, hit []float64
				optimized := true
				for _, r := range runs {
					if r.Variant == v.Name && r.N == n && r.Mode == m {
						at, de = append(at, Ms(r.Attach)), append(de, Ms(r.Detach))
						first, hit = append(first, Us(r.First)), append(hit, Us(r.Hit))
						optimized = optimized && r.Optimized
					}
				}
				res := NewResult(env.Row(v.Name), m, n, at, de)
				res.FirstHit = NewFirstHit(first, hit, optimized)
				if env.Sim != nil {
					res.Machine = env.Machine.Name
				}
				emit(res)
			}
		}
	}
	return nil
}
