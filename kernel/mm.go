package kernel

import (
	"mmlab/locking"
	"mmlab/mm"
)

// NewTaskMM returns a new single-threaded process named comm with a fresh,
// empty address space.
func NewTaskMM(comm string) *Task {
	t := NewTask(comm)
	t.MM = mm.New()
	return t
}

// Fork mirrors kernel/fork.c:copy_process() for a plain fork(): a new
// process named like t whose address space is a copy of t's (copy_mm →
// dup_mm → dup_mmap, which takes t's mmap lock killably: EINTR if t is
// killed while waiting). The child is not on any model CPU.
func (t *Task) Fork() (*Task, error) { return t.ForkWith(ForkHooks{}) }

// DupMmapHooks is implemented by mm.Hooks that need to run around dup_mm():
// uprobes takes dup_mmap_sem for read there. Mirrors
// kernel/events/uprobes.c:uprobe_start_dup_mmap() and uprobe_end_dup_mmap()
// as kernel/fork.c:dup_mm() calls them, outside the parent's mmap lock.
type DupMmapHooks interface {
	StartDupMmap(w locking.Waiter)
	EndDupMmap(w locking.Waiter)
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
