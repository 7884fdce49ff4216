package smp

import (
	"sync/atomic"

	"mmlab/sched"
)

// Int64 is a shared int64 (sync/atomic's Int64) on a cache line. The zero
// value is 0, on a line of its own once accessed in a sim run.
type Int64 struct {
	v atomic.Int64
	w word
}

// Init registers w as the word name on a line of its own. Call it before
// w is shared.
func (w *Int64) Init(name string) { w.w.init(name) }

// InitOn registers w as the word name on line l. Call it before w is
// shared.
func (w *Int64) InitOn(l *Line, name string) { w.w.initOn(l, name) }

// Load is READ_ONCE(): a plain load.
func (w *Int64) Load() int64 {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.loadSim()
	}
	return w.v.Load()
}

// Store is WRITE_ONCE(): a plain store.
func (w *Int64) Store(v int64) {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.storeSim()
	}
	w.v.Store(v)
}

// Swap is xchg(): a locked read-modify-write.
func (w *Int64) Swap(v int64) int64 {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.Swap(v)
}

// CompareAndSwap is cmpxchg(): a locked read-modify-write (one that
// fails too).
func (w *Int64) CompareAndSwap(old, new int64) bool {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.CompareAndSwap(old, new)
}

// Add is atomic_add_return(): a locked read-modify-write (LOCK XADD). It
// returns the new value.
func (w *Int64) Add(d int64) int64 {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.Add(d)
}

// And is atomic_fetch_and(): a locked read-modify-write. It returns the
// old value.
func (w *Int64) And(mask int64) int64 {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.And(mask)
}

// Or is atomic_fetch_or(): a locked read-modify-write. It returns the old
// value.
func (w *Int64) Or(mask int64) int64 {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.Or(mask)
}

// Uint64 is a shared uint64 (sync/atomic's Uint64) on a cache line. The zero
// value is 0, on a line of its own once accessed in a sim run.
type Uint64 struct {
	v atomic.Uint64
	w word
}

// Init registers w as the word name on a line of its own. Call it before
// w is shared.
func (w *Uint64) Init(name string) { w.w.init(name) }

// InitOn registers w as the word name on line l. Call it before w is
// shared.
func (w *Uint64) InitOn(l *Line, name string) { w.w.initOn(l, name) }

// Load is READ_ONCE(): a plain load.
func (w *Uint64) Load() uint64 {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.loadSim()
	}
	return w.v.Load()
}

// Store is WRITE_ONCE(): a plain store.
func (w *Uint64) Store(v uint64) {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.storeSim()
	}
	w.v.Store(v)
}

// Swap is xchg(): a locked read-modify-write.
func (w *Uint64) Swap(v uint64) uint64 {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.Swap(v)
}

// CompareAndSwap is cmpxchg(): a locked read-modify-write (one that
// fails too).
func (w *Uint64) CompareAndSwap(old, new uint64) bool {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.CompareAndSwap(old, new)
}

// Add is atomic_add_return(): a locked read-modify-write (LOCK XADD). It
// returns the new value.
func (w *Uint64) Add(d uint64) uint64 {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.Add(d)
}

// And is atomic_fetch_and(): a locked read-modify-write. It returns the
// old value.
func (w *Uint64) And(mask uint64) uint64 {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.And(mask)
}

// Or is atomic_fetch_or(): a locked read-modify-write. It returns the old
// value.
func (w *Uint64) Or(mask uint64) uint64 {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.Or(mask)
}

// Int32 is a shared int32 (sync/atomic's Int32) on a cache line. The zero
// value is 0, on a line of its own once accessed in a sim run.
type Int32 struct {
	v atomic.Int32
	w word
}

// Init registers w as the word name on a line of its own. Call it before
// w is shared.
func (w *Int32) Init(name string) { w.w.init(name) }

// InitOn registers w as the word name on line l. Call it before w is
// shared.
func (w *Int32) InitOn(l *Line, name string) { w.w.initOn(l, name) }

// Load is READ_ONCE(): a plain load.
func (w *Int32) Load() int32 {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.loadSim()
	}
	return w.v.Load()
}

// Store is WRITE_ONCE(): a plain store.
func (w *Int32) Store(v int32) {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.storeSim()
	}
	w.v.Store(v)
}

// Swap is xchg(): a locked read-modify-write.
func (w *Int32) Swap(v int32) int32 {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.Swap(v)
}

// CompareAndSwap is cmpxchg(): a locked read-modify-write (one that
// fails too).
func (w *Int32) CompareAndSwap(old, new int32) bool {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.CompareAndSwap(old, new)
}

// Add is atomic_add_return(): a locked read-modify-write (LOCK XADD). It
// returns the new value.
func (w *Int32) Add(d int32) int32 {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.Add(d)
}

// And is atomic_fetch_and(): a locked read-modify-write. It returns the
// old value.
func (w *Int32) And(mask int32) int32 {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.And(mask)
}

// Or is atomic_fetch_or(): a locked read-modify-write. It returns the old
// value.
func (w *Int32) Or(mask int32) int32 {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.Or(mask)
}

// Uint32 is a shared uint32 (sync/atomic's Uint32) on a cache line. The zero
// value is 0, on a line of its own once accessed in a sim run.
type Uint32 struct {
	v atomic.Uint32
	w word
}

// Init registers w as the word name on a line of its own. Call it before
// w is shared.
func (w *Uint32) Init(name string) { w.w.init(name) }

// InitOn registers w as the word name on line l. Call it before w is
// shared.
func (w *Uint32) InitOn(l *Line, name string) { w.w.initOn(l, name) }

// Load is READ_ONCE(): a plain load.
func (w *Uint32) Load() uint32 {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.loadSim()
	}
	return w.v.Load()
}

// Store is WRITE_ONCE(): a plain store.
func (w *Uint32) Store(v uint32) {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.storeSim()
	}
	w.v.Store(v)
}

// Swap is xchg(): a locked read-modify-write.
func (w *Uint32) Swap(v uint32) uint32 {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.Swap(v)
}

// CompareAndSwap is cmpxchg(): a locked read-modify-write (one that
// fails too).
func (w *Uint32) CompareAndSwap(old, new uint32) bool {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.CompareAndSwap(old, new)
}

// Add is atomic_add_return(): a locked read-modify-write (LOCK XADD). It
// returns the new value.
func (w *Uint32) Add(d uint32) uint32 {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.Add(d)
}

// And is atomic_fetch_and(): a locked read-modify-write. It returns the
// old value.
func (w *Uint32) And(mask uint32) uint32 {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.And(mask)
}

// Or is atomic_fetch_or(): a locked read-modify-write. It returns the old
// value.
func (w *Uint32) Or(mask uint32) uint32 {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.Or(mask)
}

// Bool is a shared bool (sync/atomic's Bool) on a cache line.
type Bool struct {
	v atomic.Bool
	w word
}

// Init registers w as the word name on a line of its own.
func (w *Bool) Init(name string) { w.w.init(name) }

// InitOn registers w as the word name on line l.
func (w *Bool) InitOn(l *Line, name string) { w.w.initOn(l, name) }

// Load is READ_ONCE(): a plain load.
func (w *Bool) Load() bool {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.loadSim()
	}
	return w.v.Load()
}

// Store is WRITE_ONCE(): a plain store.
func (w *Bool) Store(v bool) {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.storeSim()
	}
	w.v.Store(v)
}

// Swap is xchg(): a locked read-modify-write.
func (w *Bool) Swap(v bool) bool {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.Swap(v)
}

// CompareAndSwap is cmpxchg(): a locked read-modify-write.
func (w *Bool) CompareAndSwap(old, new bool) bool {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.CompareAndSwap(old, new)
}

// Pointer is a shared *T (sync/atomic's Pointer) on a cache line.
type Pointer[T any] struct {
	v atomic.Pointer[T]
	w word
}

// Init registers w as the word name on a line of its own.
func (w *Pointer[T]) Init(name string) { w.w.init(name) }

// InitOn registers w as the word name on line l.
func (w *Pointer[T]) InitOn(l *Line, name string) { w.w.initOn(l, name) }

// Load is READ_ONCE() (rcu_dereference() on x86): a plain load.
func (w *Pointer[T]) Load() *T {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.loadSim()
	}
	return w.v.Load()
}

// Store is WRITE_ONCE() (rcu_assign_pointer() on x86): a plain store.
func (w *Pointer[T]) Store(v *T) {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.storeSim()
	}
	w.v.Store(v)
}

// Swap is xchg(): a locked read-modify-write.
func (w *Pointer[T]) Swap(v *T) *T {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.Swap(v)
}

// CompareAndSwap is cmpxchg(): a locked read-modify-write.
func (w *Pointer[T]) CompareAndSwap(old, new *T) bool {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		w.rmwSim()
	}
	return w.v.CompareAndSwap(old, new)
}

// loadSim, storeSim and rmwSim are the sim paths, out of line so that the
// methods stay within the inlining budget.
//
//go:noinline
func (w *Int64) loadSim() { access(&w.w, kindLoad) }

//go:noinline
func (w *Int64) storeSim() { access(&w.w, kindStore) }

//go:noinline
func (w *Int64) rmwSim() { access(&w.w, kindRMW) }

//go:noinline
func (w *Uint64) loadSim() { access(&w.w, kindLoad) }

//go:noinline
func (w *Uint64) storeSim() { access(&w.w, kindStore) }

//go:noinline
func (w *Uint64) rmwSim() { access(&w.w, kindRMW) }

//go:noinline
func (w *Int32) loadSim() { access(&w.w, kindLoad) }

//go:noinline
func (w *Int32) storeSim() { access(&w.w, kindStore) }

//go:noinline
func (w *Int32) rmwSim() { access(&w.w, kindRMW) }

//go:noinline
func (w *Uint32) loadSim() { access(&w.w, kindLoad) }

//go:noinline
func (w *Uint32) storeSim() { access(&w.w, kindStore) }

//go:noinline
func (w *Uint32) rmwSim() { access(&w.w, kindRMW) }

//go:noinline
func (w *Bool) loadSim() { access(&w.w, kindLoad) }

//go:noinline
func (w *Bool) storeSim() { access(&w.w, kindStore) }

//go:noinline
func (w *Bool) rmwSim() { access(&w.w, kindRMW) }

//go:noinline
func (w *Pointer[T]) loadSim() { access(&w.w, kindLoad) }

//go:noinline
func (w *Pointer[T]) storeSim() { access(&w.w, kindStore) }

//go:noinline
func (w *Pointer[T]) rmwSim() { access(&w.w, kindRMW) }
