package locking

import (
	"time"
	"unsafe"
)

// HookEvent is where a sleeping writer of an RWSem pauses under a test hook.
type HookEvent = hookEvent

const (
	WriterSleeps = writerSleeps // failed to take the lock, about to sleep
	WriterWoken  = writerWoken  // woken, about to retry
)

// RWSemOwnerDistance is how many bytes an RWSem's owner word lies past its
// count word.
func RWSemOwnerDistance() uintptr {
	var s RWSem
	return unsafe.Offsetof(s.owner) - unsafe.Offsetof(s.count)
}

// SetClock replaces the clock of the handoff timeout.
func (s *RWSem) SetClock(now func() time.Time) { s.now = now }

// testHooks returns s's hooks, allocating them on first use.
func (s *RWSem) testHooks() *rwsemHooks {
	if s.hooks == nil {
		s.hooks = new(rwsemHooks)
	}
	return s.hooks
}

// SetWriterHook makes every sleeping writer of s call hook at the points
// above. Call it before s is shared.
func (s *RWSem) SetWriterHook(hook func(HookEvent)) { s.testHooks().writer = hook }

// HasHandoff reports whether the handoff bit is set.
func (s *RWSem) HasHandoff() bool { return s.count.Load()&rwsemFlagHandoff != 0 }

// Count returns the raw count word.
func (s *RWSem) Count() int64 { return s.count.Load() }
