package kernel

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"mmlab/machine"
	"mmlab/sched"
	"mmlab/sched/fair"
)

// Sim is how a simulated machine runs: the seed of its scheduler's ties and
// the bound of its run in virtual time.
type Sim struct {
	Seed  uint64
	Until time.Duration
}

// NewSimMachine returns a machine described by d whose ncpu CPUs are
// virtual, in sched's sim mode (see package sched): ncpu at most the
// description's Topology.CPUs; the tick at d.Kernel.HZ; the preemption
// model d.Kernel.Preempt; the fair class's base slice of d.Kernel.Release;
// every cost from d.Costs, its noise from d.Noise and what an idle costs
// from d.PostIdle (SimConfigOf). Its tasks run when Main runs.
func NewSimMachine(d machine.Description, ncpu int, sim Sim) (*Machine, error) {
	cfg, err := SimConfigOf(d, ncpu, sim.Until)
	if err != nil {
		return nil, err
	}
	return NewMachineOn(d, sched.New(sched.Config{CPUs: ncpu, Seed: sim.Seed, Sim: cfg})), nil
}

// SimConfigOf is the sim-mode configuration of ncpu CPUs of d, bounded by
// until. Model choices where d does not say: HZ 250 (Kconfig's default,
// CONFIG_HZ_250); preemption none (kernel/Kconfig.preempt's default,
// PREEMPT_NONE); v6.19's SCHED_FEAT set for every release (fair.V6_19:
// the one sched/fair has). Each cost is rounded to the nanosecond but an
// instruction's, which is kept in picoseconds (one cycle at 2 GHz is 0.5
// ns). User code runs up to SimLookahead ahead of the other CPUs
// (sched.SimConfig.Lookahead), a choice of the simulation.
func SimConfigOf(d machine.Description, ncpu int, until time.Duration) (*sched.SimConfig, error) {
	if err := d.Costs.Validate(); err != nil {
		return nil, fmt.Errorf("machine %s: %w", d.Name, err)
	}
	if ncpu < 1 || ncpu > d.Topology.CPUs || ncpu > sched.MaxSimCPUs {
		return nil, fmt.Errorf("machine %s has %d CPUs: cannot simulate %d", d.Name, d.Topology.CPUs, ncpu)
	}
	if until <= 0 {
		return nil, errors.New("kernel: a simulated machine needs a positive bound in virtual time")
	}
	preempt, err := ParsePreempt(d.Kernel.Preempt)
	if err != nil {
		return nil, fmt.Errorf("machine %s: %w", d.Name, err)
	}
	ns := func(c machine.Cost) time.Duration { return time.Duration(math.Round(c.NS)) }
	k := d.Costs
	durations := func(ns []float64) (ds []time.Duration) {
		for _, v := range ns {
			ds = append(ds, time.Duration(math.Round(v)))
		}
		return ds
	}
	noise := sched.SimNoise{PerSecond: d.Noise.PerSecond, Durations: durations(d.Noise.NS)}
	var idle []sched.IdleCost
	for _, p := range d.PostIdle.Points {
		idle = append(idle, sched.IdleCost{Idle: time.Duration(math.Round(p.IdleNS)), Extra: time.Duration(math.Round(p.ExtraNS))})
	}
	return &sched.SimConfig{
		Noise: noise,
		Until: until, HZ: d.Kernel.HZ, Preempt: preempt, Lookahead: SimLookahead, Machine: &d,
		NormalizedSlice: NormalizedSlice(d.Kernel.Release),
		InstructionPS:   int64(math.Round(k.Instruction.NS * 1000)),
		Costs: sched.SimCosts{Int3: ns(k.Int3), Syscall: ns(k.Syscall), PageFault: ns(k.PageFault),
			PopulatePage: ns(k.PopulatePage), IPI: ns(k.IPI), Fork: ns(k.Fork), ForkPage: ns(k.ForkPage), ZapPage: ns(k.ZapPage),
			ForkSamples: durations(k.Fork.Samples), PostIdle: idle,
			ContextSwitch: ns(k.ContextSwitch), Wakeup: ns(k.Wakeup), KernelInstructionPS: int64(math.Round(k.KernelInstruction.NS * 1000))},
	}, nil
}

// SimLookahead is how far user code of one simulated CPU may run ahead of
// the others' clocks: 2,000 instructions at 2 GHz, so that two CPUs busy
// in user mode hand off every microsecond instead of every instruction;
// the model's user code shares no memory between CPUs that a microsecond
// of skew would reorder observably for an experiment's figures (the
// trigger loops share none).
const SimLookahead = time.Microsecond

// ParsePreempt is a machine.Kernel preemption model as sched's; "" (not
// known) is none, Kconfig's default (PREEMPT_NONE).
func ParsePreempt(s string) (sched.Preempt, error) {
	for _, p := range []sched.Preempt{sched.PreemptNone, sched.PreemptVoluntary, sched.PreemptFull, sched.PreemptLazy} {
		if s == p.String() {
			return p, nil
		}
	}
	if s == "" {
		return sched.PreemptNone, nil
	}
	return 0, fmt.Errorf("preemption model %q: want none, voluntary, full or lazy", s)
}

// NormalizedSlice is normalized_sysctl_sched_base_slice of a release:
// 0.75 ms from v6.6 (EEVDF) to v6.14, 0.70 ms from v6.15 (commit
// 2ae891b82695); 0.70 ms for a release it cannot read.
func NormalizedSlice(release string) int64 {
	major, rest, _ := strings.Cut(release, ".")
	minor, _, _ := strings.Cut(rest, ".")
	a, err1 := strconv.Atoi(major)
	b, err2 := strconv.Atoi(minor)
	if err1 == nil && err2 == nil && a == 6 && b < 15 {
		return fair.NormalizedBaseSlice66
	}
	return fair.NormalizedBaseSlice
}

// ErrSimUntil is the error of Main when a simulated machine's run reached
// its bound in virtual time before the runner's body returned.
var ErrSimUntil = errors.New("the simulated run reached its bound in virtual time before it finished")

// Main runs body, a runner's own part of a run (it starts tasks, waits for
// them with Runner.Wait, reads sched.Now), and returns its error. On a
// real-time machine body runs on the caller. On a simulated one it runs
// as a model thread named name on CPU 0, in the machine's one run
// (System.Run), which ends when every thread has exited: Main is called
// once per simulated machine.
func (m *Machine) Main(name string, body func() error) error {
	if !m.Sys.Sim() {
		return body()
	}
	var err error
	finished := false
	m.Sys.SpawnNamed(name, 0, 0, func(*sched.Thread) {
		err = body()
		finished = true
	})
	rec, rerr := m.Sys.Run()
	switch {
	case rerr != nil:
		return fmt.Errorf("simulated machine %s: %w", m.Desc.Name, rerr)
	case !finished && rec.TimeLimit:
		return fmt.Errorf("simulated machine %s: %w (%v)", m.Desc.Name, ErrSimUntil, rec.End)
	case !finished:
		return fmt.Errorf("simulated machine %s: the run ended before %s did", m.Desc.Name, name)
	}
	return err
}

// Wait waits until the Runner's body has returned: a receive from Done
// in real time, a model sleep (sched.Wait) in a simulated or
// deterministic run.
func (r *Runner) Wait() { sched.Wait(nil, "task exit", r.done, nil) }
