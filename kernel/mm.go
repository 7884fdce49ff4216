package kernel

import (
	"errors"
	"fmt"

	"mmlab/locking"
	"mmlab/machine"
	"mmlab/mm"
)

// NewTaskMM returns a new single-threaded process of ns named comm with a
// fresh, empty address space of ns on a machine with features f.
func NewTaskMM(ns *Namespace, comm string, f machine.Features) *Task {
	t := NewTask(ns, comm)
	t.MM = mm.New(&ns.MM, f)
	return t
}

// Fork mirrors kernel/fork.c:copy_process() for a plain fork(): a new
// process named like t whose address space is a copy of t's (copy_mm →
// dup_mm → dup_mmap, which takes t's mmap lock killably: EINTR if t is
// killed while waiting). The child is not on any model CPU.
func (t *Task) Fork() (*Task, error) { return t.ForkWith(ForkHooks{}) }

// Config is what a process's kernel has of uprobes, as fork sees them:
// chosen when the process is made (NewTaskMMWith) and inherited by every
// task it forks or clones. A process made without one (NewTask, NewTaskMM)
// is of a kernel without uprobes: its fork takes no dup_mmap_sem.
type Config struct {
	// Design is seed 000's design of dup_mm() (fork_design.go); it must
	// be set.
	Design Design
	// DupMmapSem is dup_mmap_sem, which uprobe_start_dup_mmap() and
	// uprobe_end_dup_mmap() take for read around the copy; it must be set.
	DupMmapSem *locking.PercpuRWSem
	// Hooks are the mm.Hooks of the process's address space (package
	// uprobes), which its forks' address spaces inherit.
	Hooks mm.Hooks

	hooks testHooks // the machine's (Machine.NewTaskMMWith)
}

// NewTaskMMWith is NewTaskMM in a kernel with uprobes c. It refuses an
// unset c.Design (design.ErrUnset) and a nil c.DupMmapSem.
func (m *Machine) NewTaskMMWith(comm string, c Config) (*Task, error) {
	if err := Designs.Check(c.Design); err != nil {
		return nil, fmt.Errorf("kernel: %w", err)
	}
	if c.DupMmapSem == nil {
		return nil, errors.New("kernel: a Config without dup_mmap_sem")
	}
	c.hooks = m.hooks
	t := m.NewTaskMM(comm)
	t.uprobes = &c
	t.MM.Hooks = c.Hooks
	return t, nil
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
