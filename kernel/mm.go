package kernel

import (
	"mmlab/locking"
	"mmlab/machine"
	"mmlab/mm"
)

// NewTaskMM returns a new single-threaded process named comm with a fresh,
// empty address space on a machine with features f.
func NewTaskMM(comm string, f machine.Features) *Task {
	t := NewTask(comm)
	t.MM = mm.New(f)
	return t
}

// Fork mirrors kernel/fork.c:copy_process() for a plain fork(): a new
// process named like t whose address space is a copy of t's (copy_mm →
// dup_mm → dup_mmap, which takes t's mmap lock killably: EINTR if t is
// killed while waiting). The child is not on any model CPU.
func (t *Task) Fork() (*Task, error) { return t.ForkWith(ForkHooks{}) }

// DupMmapHooks is implemented by the mm.Hooks of uprobes, which take part
// in dup_mm() (kernel/fork.c): ForkDesign returns what fork needs of them.
type DupMmapHooks interface {
	ForkDesign() ForkDesign
}

// ForkDesign is what dup_mm() needs of uprobes, fixed when they were built:
// dup_mmap_sem, which uprobe_start_dup_mmap() and uprobe_end_dup_mmap()
// take for read around the copy, and seed 000's design of dup_mm().
type ForkDesign struct {
	DupMmapSem *locking.PercpuRWSem
	// After is the seed's "after" design: fork never sleeps on the
	// parent's mmap lock with dup_mmap_sem held (patch 6), tears a failed
	// child down outside it (patch 2), and points the child task to its mm
	// before uprobes can find it (patch 7).
	After bool
}

// ExitMM mirrors exit_mm() + mmput(): drop the task's reference to its
// address space; the last user tears it down (exit_mmap).
func (t *Task) ExitMM() {
	m := t.MM
	if m == nil {
		return
	}
	t.MM = nil
	if m.Users.Add(-1) == 0 {
		m.Exit()
	}
}
