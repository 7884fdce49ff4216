package locking

import "mmlab/locking/lockrank"

// Mutex is a sleeping mutex (struct mutex) for the model's own slow paths
// (package rcu serialises grace periods with it). Model choice: it is an
// RWSem taken only for writing, so waiters queue FIFO with the rwsem's
// handoff rules instead of kernel/locking/mutex.c's spinning and handoff;
// what it buys over sync.Mutex is that its sleeps go through sched.Wait, so
// a deterministic run schedules them. The zero value is unlocked.
type Mutex struct {
	s RWSem
}

// SetName sets the name shown in records. Call it before the lock is shared.
func (m *Mutex) SetName(name string) { m.s.SetName(name) }

// SetClass sets its class in the lock order (see RWSem.SetClass).
func (m *Mutex) SetClass(c lockrank.Class) { m.s.SetClass(c) }

// Lock takes the mutex, sleeping uninterruptibly. Mirrors mutex_lock().
func (m *Mutex) Lock() { m.s.DownWrite(nil) }

// Unlock releases it. Mirrors mutex_unlock().
func (m *Mutex) Unlock() { m.s.UpWrite() }

// TryLock takes the mutex if it is free and reports whether it did. Mirrors
// mutex_trylock().
func (m *Mutex) TryLock() bool { return m.s.DownWriteTrylock() }
