package kernel

import "mmlab/mm"

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
func (t *Task) Fork() (*Task, error) {
	c := NewTask(t.Comm)
	if t.MM == nil {
		return c, nil
	}
	m, err := t.MM.Fork(t)
	if err != nil {
		return nil, err
	}
	c.MM = m // tsk->mm is set after dup_mm returns, as in copy_mm
	return c, nil
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
