package kernel

import (
	"mmlab/design"
	"mmlab/locking"
	"mmlab/mm"
	"mmlab/sched"
)

// Design is seed 000's switch ("uprobes: Don't stall fork() when mmap_lock
// is busy"): the design of dup_mm() here and of register_for_each_vma() in
// package uprobes, whose Config takes it. The zero Design is unset:
// NewTaskMMWith and uprobes.New refuse it (design.ErrUnset).
type Design int

const (
	// DesignBefore is v6.19: registerForEachVMA sleeps on each mm's mmap
	// write lock with dup_mmap_sem held for write; fork sleeps on the
	// parent's mmap lock with it held for read, and tears a failed child
	// down inside it; the child's task points to its mm only after its VMAs
	// are in i_mmap; a killed unregistering task stops half-way and leaks
	// the uprobe and its remaining breakpoints; an optimized site whose
	// removal stopped half-way is later restored by its first byte only,
	// and a failed optimized write warns.
	DesignBefore Design = iota + 1
	// DesignAfter is the seed's patches 1-8: only trylocks under
	// dup_mmap_sem, busy mms waited for outside it and the pass redone;
	// teardown outside dup_mmap_sem; a half-written optimized site is
	// finished and a failed optimized write does not warn (patches 3, 4);
	// tsk->mm set before the child is findable; removal completes even for
	// a killed task.
	DesignAfter
)

// Designs are seed 000's designs, before first, named "before" and
// "after".
var Designs = design.NewSet[Design]("seed 000 design", "before", "after")

// String returns "before" or "after".
func (d Design) String() string { return Designs.String(d) }

// MarshalText returns the design's name.
func (d Design) MarshalText() ([]byte, error) { return Designs.Marshal(d) }

// UnmarshalText sets d to the design named text.
func (d *Design) UnmarshalText(text []byte) error { return Designs.Unmarshal(d, text) }

// ForkHooks are the step drivers and fault injection of ForkWith.
type ForkHooks struct {
	// InitTask runs with the new task before its mm is copied, as
	// perf_event_init_task() does in copy_process() (inherited events).
	InitTask func(child *Task)
	// FailAfter > 0: dup_mmap fails with ENOMEM after that many VMAs.
	FailAfter int
	// OnVMA runs after each copied VMA, inside dup_mmap (mm.ForkOptions).
	OnVMA func(n int)
	// Teardown runs on the error path just before the half-built mm is
	// torn down (inside dup_mmap_sem before, outside after).
	Teardown func()
	// BeforeSetMM runs, in the before design, between the end of the
	// dup_mmap_sem read section and tsk->mm = mm (copy_mm).
	BeforeSetMM func(child *Task)
}

// ForkWith is Fork with hooks: it mirrors kernel/fork.c:copy_process(),
// copy_mm() and dup_mm() in the design of the process's uprobes (its
// Config, which the child inherits; without one fork takes no
// dup_mmap_sem). In a sim run it charges the machine's fork cost, and mm
// each present PTE copied (sched.CostFork, sched.CostForkPage).
//
// Before (v6.19): dup_mmap_sem is taken for read, then dup_mmap sleeps on
// the parent's mmap lock inside it; a failed copy is torn down (mmput)
// before dup_mmap_sem is dropped; tsk->mm is set after.
//
// After (seed 000 patches 2, 6, 7): see forkAfter.
func (t *Task) ForkWith(h ForkHooks) (*Task, error) {
	// The fixed work of copy_process(), dup_mm() of a minimal mm and
	// wake_up_new_task(), charged at once before dup_mmap (a model
	// choice: the kernel does part of it, dup_mmap()'s per-VMA work of a
	// small mm, under the parent's mmap lock). The present PTEs dup_mmap
	// copies are charged per PTE under that lock (mm.MM.ForkWith).
	sched.ChargeCost(sched.CostFork, 1)
	c := NewTask(t.ns, t.Comm)
	c.pkru = t.pkru // fpu_clone(): the child has the parent's PKRU
	c.uprobes = t.uprobes
	if h.InitTask != nil {
		h.InitTask(c)
	}
	if t.MM == nil {
		return c, nil
	}
	if t.uprobes == nil {
		return t.forkBefore(c, nil, h)
	}
	if t.uprobes.Design == DesignAfter {
		return t.forkAfter(c, t.uprobes.DupMmapSem, h)
	}
	return t.forkBefore(c, t.uprobes.DupMmapSem, h)
}

// forkBefore mirrors dup_mm() in v6.19; sem is dup_mmap_sem (nil: no
// uprobes).
func (t *Task) forkBefore(c *Task, sem *locking.PercpuRWSem, h ForkHooks) (*Task, error) {
	opts := mm.ForkOptions{FailAfter: h.FailAfter, OnVMA: h.OnVMA}
	if sem != nil {
		sem.DownRead(t) // uprobe_start_dup_mmap()
	}
	m, err := t.MM.ForkWith(t, opts)
	if err != nil {
		if m != nil {
			if h.Teardown != nil {
				h.Teardown()
			}
			sched.At("dup_mm", "mmput failed child")
			mmputMM(m) // exit_mmap under dup_mmap_sem: the bug of patch 2
		}
		if sem != nil {
			sem.UpRead(t) // uprobe_end_dup_mmap()
		}
		return nil, err
	}
	if sem != nil {
		sem.UpRead(t)
	}
	if h.BeforeSetMM != nil {
		h.BeforeSetMM(c)
	}
	sched.At("copy_mm", "before tsk->mm = mm")
	c.MM = m // copy_mm: after dup_mm returned, so after dup_mmap_sem
	return c, nil
}

// forkAfter mirrors dup_mm() with seed 000's patches 2, 6 and 7. The
// parent's mmap lock is only trylocked with dup_mmap_sem held. When it is
// busy, dup_mmap_sem is dropped and the lock waited for (killably) without
// it; dup_mmap_sem is then only trylocked (taken after the mmap lock, the
// inverse order, which cannot deadlock as it never sleeps). If a writer is
// around, the mmap lock is dropped, the writer waited for, and the dance
// starts again. The child task points to its mm before any of its VMAs is
// in i_mmap, and a failed copy is torn down after dup_mmap_sem is released.
func (t *Task) forkAfter(c *Task, sem *locking.PercpuRWSem, h ForkHooks) (*Task, error) {
	pm := t.MM
	for !t.uprobes.hooks.undoTrylock {
		sem.DownRead(t)
		if pm.MmapWriteTrylock() {
			break
		}
		sem.UpRead(t)
		if err := pm.MmapWriteLockKillable(t); err != nil {
			return nil, err
		}
		if sem.DownReadTrylock(t) {
			break
		}
		pm.MmapWriteUnlock()
		sem.DownRead(t) // wait for the writer, holding no mmap lock
		sem.UpRead(t)
	}
	if t.uprobes.hooks.undoTrylock {
		sem.DownRead(t)
		if err := pm.MmapWriteLockKillable(t); err != nil {
			sem.UpRead(t)
			return nil, err
		}
	}
	newMM := func(cm *mm.MM) { c.MM = cm }
	if t.uprobes.hooks.undoEarlyMM {
		newMM = nil
	}
	m, err := pm.ForkWith(t, mm.ForkOptions{Locked: true, FailAfter: h.FailAfter, OnVMA: h.OnVMA, NewMM: newMM})
	if err != nil && m != nil && t.uprobes.hooks.undoTeardownOutside {
		sched.At("dup_mm", "mmput failed child")
		mmputMM(m)
		m = nil
	}
	sem.UpRead(t)
	if err == nil && t.uprobes.hooks.undoEarlyMM {
		sched.At("copy_mm", "before tsk->mm = mm")
		c.MM = m
	}
	if err != nil {
		c.MM = nil
		if m != nil {
			if h.Teardown != nil {
				h.Teardown()
			}
			sched.At("dup_mm", "mmput failed child")
			mmputMM(m)
		}
		return nil, err
	}
	return c, nil
}

// mmputMM mirrors mmput(): the last user tears the mm down.
func mmputMM(m *mm.MM) {
	if m.Users.Add(-1) == 0 {
		m.Exit()
	}
}
