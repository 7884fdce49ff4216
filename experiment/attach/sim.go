package attach

import (
	"context"
	"fmt"
	"time"

	"mmlab/binfmt"
	"mmlab/cpu"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/rcu"
	"mmlab/sched"
	"mmlab/uprobes"
)

// On a simulated machine the attaching task is the machine's main thread
// (kernel.Machine.Main), on CPU 0, as the real-time run's attacher has the
// host's other core; the mappers that run take CPUs 1 to c.CPUs, and the
// hitter runs on CPU 1 while they are parked (on CPU 0 if none runs).
const simHitCPU = 1

// registerInstructions is uprobe_register()'s own work per probe besides
// what the model charges on a simulated machine (the page copies of its
// breakpoint writes, their TLB shootdowns, the grace periods it waits
// for): alloc_uprobe() and insert_uprobe() into the tree, the consumer
// added, build_map_info()'s walk of the file's mappings and the
// breakpoints' checks. A model choice (2,000 instructions), no count of
// the compiled code being at hand.
const registerInstructions = 2000

// simHZ is the HZ a simulated machine of d ticks at, and its grace periods
// are timed at (rcu.Timing): d's, else Kconfig's default 250 as
// kernel.SimConfigOf takes it.
func simHZ(d machine.Description) int {
	if d.Kernel.HZ > 0 {
		return d.Kernel.HZ
	}
	return 250
}

// measureSim is measure on simulated machines: each variant's kernel runs
// every run, count and mode in its one run (Machine.Main), one kernel
// after the other, as nothing of the host comes between them. The pause
// before each attach is a sleep in virtual time.
func measureSim(ctx context.Context, c modelConfig) ([]modelRun, error) {
	var out []modelRun
	for _, v := range c.Variants {
		k, ms, err := simAttachKernel(c, v)
		if err != nil {
			return out, err
		}
		registerWork := time.Duration(registerInstructions * c.Machine.Costs.Instruction.NS)
		err = k.Main("attach", func() error {
			ms.start()
			defer ms.stop()
			for range c.Runs {
				for _, n := range c.Ns {
					for _, mode := range c.Modes {
						if err := ctx.Err(); err != nil {
							return err
						}
						sched.Sleep(c.Gap)
						ms.run(true)
						run, err := attachOnce(k.Uprobes, k.sled.File, k.sled.Offset("sled"), mode, n, registerWork)
						ms.run(false)
						if err != nil {
							return err
						}
						if run.First, run.Hit, run.Optimized, err = k.firstHit(); err != nil {
							return err
						}
						run.Variant = v.Name
						out = append(out, run)
					}
				}
			}
			return nil
		})
		k.Stop()
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// simAttachKernel is attachKernel on a simulated machine of c.CPUs+1
// virtual CPUs, its grace periods timed at the machine's HZ; its mappers
// start when the machine runs (simMappers.start).
func simAttachKernel(c modelConfig, v uprobes.Variant) (*modelKernel, *simMappers, error) {
	cfg := v.Config
	cfg.GP = rcu.Timing{HZ: simHZ(c.Machine)}
	mk, err := binfmt.NewSimKernel(c.Machine, c.CPUs+1, *c.Sim, cfg)
	if err != nil {
		return nil, nil, err
	}
	k, err := newModelKernel(mk)
	if err != nil {
		return nil, nil, err
	}
	k.hitCPU = min(simHitCPU, c.CPUs) // CPU 0 if no mapper runs
	ms := &simMappers{k: k}
	if k.hitter, err = k.Process("hitter", k.hitProg, 1); err != nil {
		k.Stop()
		return nil, nil, err
	}
	for i := range c.Procs {
		t, err := k.Process(fmt.Sprint("mapper", i), k.sled, 1)
		if err != nil {
			k.Stop()
			return nil, nil, err
		}
		if i < c.CPUs {
			ms.tasks = append(ms.tasks, t)
		}
	}
	return k, ms, nil
}

// simMappers are the mappers that run on a simulated machine: tasks on
// CPUs 1 to len(tasks) that loop through the sled while running is set
// and sleep (sched.Wait) while it is not, told by run. Only the machine's
// threads touch them, one at a time.
type simMappers struct {
	k       *modelKernel
	tasks   []*kernel.Task
	runners []*kernel.Runner
	wake    []chan struct{} // per mapper: a wake-up from its sleep
	changed chan struct{}   // a mapper began a loop or went to sleep
	running bool            // the mappers are to loop
	stopped bool            // the mappers are to exit
	begun   int             // loops begun by all the mappers
	parked  int             // mappers asleep
}

// start starts the mappers and returns once each has begun a loop through
// the sled (its pages are faulted in), then parks them.
func (ms *simMappers) start() {
	ms.changed = make(chan struct{}, 1)
	ms.running = true
	for i, t := range ms.tasks {
		wake := make(chan struct{}, 1)
		ms.wake = append(ms.wake, wake)
		ms.runners = append(ms.runners, ms.k.Machine.Start(t, 1+i, 0, func(r *kernel.Runner) {
			for !ms.stopped {
				if !ms.running {
					ms.parked++
					sched.Notify(ms.changed)
					r.Block(func() { sched.Wait(nil, "mapper parked", wake, nil) })
					ms.parked--
					continue
				}
				ms.begun++
				sched.Notify(ms.changed)
				if s := binfmt.Loop(r, 0, ms.k.sled.Addr("loop"), 256); s.Reason != cpu.StopHalt {
					return
				}
			}
		}))
	}
	ms.waitFor(func() bool { return ms.begun >= len(ms.tasks) })
	ms.run(false)
}

// run lets the mappers loop (on), returning once each has begun a loop,
// or parks them, returning once each sleeps: the first-hit measurement
// has CPU 1 to itself, as in real time.
func (ms *simMappers) run(on bool) {
	ms.running = on
	if !on {
		ms.waitFor(func() bool { return ms.parked == len(ms.tasks) })
		return
	}
	n := ms.begun
	for _, w := range ms.wake {
		sched.Notify(w)
	}
	ms.waitFor(func() bool { return ms.begun >= n+len(ms.tasks) })
}

// stop ends the mappers and waits for their exit.
func (ms *simMappers) stop() {
	ms.stopped, ms.running = true, true
	for _, w := range ms.wake {
		sched.Notify(w)
	}
	for _, r := range ms.runners {
		r.Wait()
	}
}

func (ms *simMappers) waitFor(cond func() bool) {
	for !cond() {
		sched.Wait(nil, "mappers", ms.changed, nil)
	}
}
