package sched

import (
	"sync/atomic"
	"time"

	"mmlab/machine"
)

// SimRunning is 1 while a sim run is active in the process (Run holds
// detMu, so there is at most one), else 0; only Run stores it, with
// atomic.StoreUint32, and everyone else reads it with atomic.LoadUint32.
// Package smp's shared words load it on every access, the one check that
// real-time and deterministic mode pay (a plain load on x86-64): a plain
// variable rather than a function or an atomic.Bool so that the words'
// methods, and small functions around them, stay within the compiler's
// inlining budget.
var SimRunning uint32

// SimActive reports whether a sim run is active.
func SimActive() bool { return atomic.LoadUint32(&SimRunning) != 0 }

// SimCPU returns, when the caller is the running thread of the active sim
// run, its System, the virtual CPU it runs on and that CPU's clock (ns
// since Epoch); ok is false otherwise (no sim run, or a goroutine outside
// it, as Run's between two threads).
func SimCPU() (s *System, cpu int, clock int64, ok bool) {
	t := running()
	if t == nil || t.det.sim == nil {
		return nil, 0, 0, false
	}
	s = t.sys()
	return s, t.cpu.ID, s.det.sim.cpus[t.cpu.ID].clock, true
}

// SimMachine returns SimConfig.Machine of a sim System (nil if unset or
// not in sim mode).
func (s *System) SimMachine() *machine.Description {
	if !s.Sim() {
		return nil
	}
	return s.det.sim.machine
}

// SimMemory returns what SetSimMemory attached to a sim System (nil if
// nothing, or not in sim mode): package smp's cache-line state of the run.
func (s *System) SimMemory() any {
	if !s.Sim() {
		return nil
	}
	return s.det.sim.mem
}

// SetSimMemory attaches v, package smp's state of the run, to a sim
// System; a no-op in the other modes. Called by the running thread (or
// before Run, or after it ends).
func (s *System) SetSimMemory(v any) {
	if s.Sim() {
		s.det.sim.mem = v
	}
}

// Stall is d spent by the running thread of a sim run waiting on memory
// (a cache line in flight, a store buffer draining): its CPU's clock
// advances by d and the ticks and interruptions passed are taken
// (sched_tick() sets what it sets; an interruption moves the end on), but
// unlike Charge it never schedules, fires no timer and hands the baton to
// no other thread, so that it may run where model code holds a host lock
// (a sync.Mutex such as RWSem's wait_lock) that another thread would
// block on. A reschedule or timer that falls due inside takes effect
// at the thread's next preemption point (At, Point, Relax, Charge), where
// it finds its clock past the horizon. A no-op outside sim mode.
func Stall(d time.Duration) {
	t := running()
	if t == nil || t.det.sim == nil || d <= 0 {
		return
	}
	s := t.sys().det.sim
	c := s.cpuOf(t)
	end := c.clock + int64(d)
	for c.nextTick <= end || c.nextNoise <= end {
		c.clock = max(c.clock, min(c.nextTick, c.nextNoise))
		at := c.clock
		s.interrupts(c)
		end += c.clock - at // the interruptions' time
	}
	c.clock = max(c.clock, end)
}
