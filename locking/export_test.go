package locking

import (
	"sync"
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

// writerHooks are the hooks SetWriterHook installed, by lock.
var writerHooks struct {
	sync.Mutex
	m map[*RWSem]func(HookEvent)
}

func init() {
	hooks.writer = func(s *RWSem, e hookEvent) {
		writerHooks.Lock()
		h := writerHooks.m[s]
		writerHooks.Unlock()
		if h != nil {
			h(e)
		}
	}
}

// SetWriterHook makes every sleeping writer of s call hook at the points
// above.
func (s *RWSem) SetWriterHook(hook func(HookEvent)) {
	writerHooks.Lock()
	defer writerHooks.Unlock()
	if writerHooks.m == nil {
		writerHooks.m = map[*RWSem]func(HookEvent){}
	}
	writerHooks.m[s] = hook
}

// HasHandoff reports whether the handoff bit is set.
func (s *RWSem) HasHandoff() bool { return s.count.Load()&rwsemFlagHandoff != 0 }

// Count returns the raw count word.
func (s *RWSem) Count() int64 { return s.count.Load() }
