package maptear

import (
	"context"
	"time"

	"mmlab/experiment"
	"mmlab/explore"
	"mmlab/kernel"
	"mmlab/procfs"
	"mmlab/sched"
)

// On a simulated machine the reader (Check, the machine's main thread) runs
// on CPU 0 and the modifier, a task of its own, on CPU 1, so that the two
// interleave in virtual time.
const (
	simCPUs     = 2
	modifierCPU = 1
)

// The kernel work a simulated machine charges for the model's Go work,
// model choices (no counts of the compiled kernel code being at hand):
const (
	// pointInstructions is the work at each of the maps file's points
	// (procfs.Options.Point): a line formatted by show_map_vma() under its
	// lock, a query's VMA read, the return to user space.
	pointInstructions = 250
	// callInstructions is the work of one of the modifier's system calls
	// besides its entry and exit: the VMA split, merge or move of an mmap,
	// mremap or mprotect (charged before the call).
	callInstructions = 1000
	// loopInstructions is the modifier loop's own user code per turn.
	loopInstructions = 10
)

// simSpace is what a ModelSpace has on a simulated machine: the machine,
// whose CPU modifierCPU runs the modifier task while it runs.
type simSpace struct {
	mach     *kernel.Machine
	modifier *kernel.Runner
	loop     time.Duration // loopInstructions
	stopping bool
	err      error // the modifier's, set before it exits
}

// runSim runs the check of o on a simulated machine of its own for the
// walk v: Check on the machine's main thread, the modifier on CPU
// modifierCPU. Each result names the machine.
func runSim(ctx context.Context, o *Options, env experiment.Env, v procfs.Variant, row experiment.Row, emit func(Result)) error {
	mach, err := kernel.NewSimMachine(env.Machine, simCPUs, kernel.Sim{Seed: env.Sim.Seed, Until: env.Sim.Until})
	if err != nil {
		return err
	}
	defer mach.Stop()
	return mach.Main("reader", func() error {
		s, err := newSimModelSpace(mach, v)
		if err != nil {
			return err
		}
		return Check(ctx, s, o, row, env.Progress, func(r Result) {
			r.Machine = env.Machine.Name
			emit(r)
		})
	})
}

// newSimModelSpace is NewModelSpace on the simulated machine mach, each
// system call of the reader and the modifier charged its entry and exit,
// and the kernel work pointInstructions at each of the maps file's points
// and callInstructions per modifier call. The file is opened with
// procfs.PreemptFull so that its points include each line's: under the
// machine's preemption model a charge there passes time without
// preempting (sched.Charge preempts only under full and lazy).
func newSimModelSpace(mach *kernel.Machine, v procfs.Variant) (*ModelSpace, error) {
	instr := mach.Desc.Costs.Instruction.NS
	point := time.Duration(pointInstructions * instr)
	call := time.Duration(callInstructions * instr)
	opt := procfs.Options{Variant: v, Preempt: procfs.PreemptFull, Point: func() { sched.Charge(point) }}
	s, err := newModelSpace(&mach.NS.MM, mach.Desc, opt)
	if err != nil {
		return nil, err
	}
	s.sim = &simSpace{mach: mach, loop: time.Duration(loopInstructions * instr)}
	s.ops.call = func() {
		sched.ChargeCost(sched.CostSyscall, 1)
		sched.Charge(call)
	}
	return s, nil
}

// start starts s's modifier task.
func (ss *simSpace) start(s *ModelSpace) {
	ss.stopping, ss.err = false, nil
	ss.modifier = ss.mach.Start(ss.mach.NewTask("modifier"), modifierCPU, 0, func(*kernel.Runner) {
		ss.err = s.modifyUntil(func() bool { return ss.stopping })
	})
}

// stop stops the modifier task, waits for its exit and returns its error.
func (ss *simSpace) stop() error {
	ss.stopping = true
	ss.modifier.Wait()
	return ss.err
}

// simGapMapper is explore.Modelled whose calls charge call first; Write,
// a store, pays a page fault's entry and exit (the first store to the
// spare page faults it in).
type simGapMapper struct {
	explore.Modelled
	call func()
}

func (g simGapMapper) MapAnon(addr, length uint64, prot int) error {
	g.call()
	return g.Modelled.MapAnon(addr, length, prot)
}

func (g simGapMapper) Move(src, dst uint64) error {
	g.call()
	return g.Modelled.Move(src, dst)
}

func (g simGapMapper) Write(addr uint64) error {
	sched.ChargeCost(sched.CostPageFault, 1)
	return g.Modelled.Write(addr)
}
