package locking

import "time"

// HookEvent is where a sleeping writer of an RWSem pauses under a test hook.
type HookEvent int

const (
	WriterSleeps HookEvent = iota // failed to take the lock, about to sleep
	WriterWoken                   // woken, about to retry
)

// SetClock replaces the clock of the handoff timeout.
func (s *RWSem) SetClock(now func() time.Time) { s.now = now }

// SetWriterHook makes every sleeping writer call hook at the points above.
func (s *RWSem) SetWriterHook(hook func(HookEvent)) {
	s.writerSleeps = func() { hook(WriterSleeps) }
	s.writerWoken = func() { hook(WriterWoken) }
}

// HasHandoff reports whether the handoff bit is set.
func (s *RWSem) HasHandoff() bool { return s.count.Load()&rwsemFlagHandoff != 0 }

// Count returns the raw count word.
func (s *RWSem) Count() int64 { return s.count.Load() }
