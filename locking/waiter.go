package locking

import (
	"sync/atomic"
	"time"

	"mmlab/sched"
)

// Waiter is what a lock sees of the task waiting on it.
type Waiter interface {
	// Fatal returns a channel closed once the task has a fatal signal
	// (SIGKILL) pending; nil if never.
	Fatal() <-chan struct{}
	// CPU returns the id of the model CPU the task runs on, or -1.
	CPU() int
}

// BlockRecorder is optionally implemented by a Waiter: after each blocking
// wait the lock calls RecordBlocked(lockName, d) with the exact time the
// waiter spent blocked on that lock.
type BlockRecorder interface {
	RecordBlocked(lock string, d time.Duration)
}

// Blocker is optionally implemented by a Waiter that runs on a model CPU
// (a sched.Thread, or a kernel.Task that owns one): the lock sleeps by
// calling Block(wait), so that the task gives up its CPU while wait blocks.
// wait only sleeps (sched.Wait); it runs no model code.
type Blocker interface {
	Block(wait func())
}

// sleep runs wait, through w's Block if it has one. It mirrors
// schedule() in a sleeping lock's wait loop.
func sleep(w Waiter, wait func()) {
	if b, ok := w.(Blocker); ok {
		b.Block(wait)
		return
	}
	wait()
}

// LockStats are a lock's counters since creation or the last ResetStats.
type LockStats struct {
	Acquisitions int64         // successful acquisitions, read or write, trylocks included
	Contended    int64         // acquisitions or attempts that had to wait
	Interrupted  int64         // killable waits that returned EINTR
	WaitTotal    time.Duration // total time spent waiting
	WaitMax      time.Duration // longest single wait
}

// waitStats accumulates the slow-path part of LockStats.
type waitStats struct {
	contended   atomic.Int64
	interrupted atomic.Int64
	waitTotal   atomic.Int64
	waitMax     atomic.Int64
}

// record accounts one wait of d, on the lock's counters and on the waiter.
func (ws *waitStats) record(lock string, w Waiter, d time.Duration) {
	ws.contended.Add(1)
	ws.waitTotal.Add(int64(d))
	for {
		old := ws.waitMax.Load()
		if int64(d) <= old || ws.waitMax.CompareAndSwap(old, int64(d)) {
			break
		}
	}
	if br, ok := w.(BlockRecorder); ok {
		br.RecordBlocked(lock, d)
	}
}

func (ws *waitStats) fill(st *LockStats) {
	st.Contended = ws.contended.Load()
	st.Interrupted = ws.interrupted.Load()
	st.WaitTotal = time.Duration(ws.waitTotal.Load())
	st.WaitMax = time.Duration(ws.waitMax.Load())
}

func (ws *waitStats) reset() {
	ws.contended.Store(0)
	ws.interrupted.Store(0)
	ws.waitTotal.Store(0)
	ws.waitMax.Store(0)
}

// fatalChan returns w's fatal channel, or nil for a nil Waiter.
func fatalChan(w Waiter) <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.Fatal()
}

// closed reports whether ch is closed (sched.TryRecv, as fatal channels
// are only ever closed); a nil channel never is. It mirrors
// signal_pending_state() for a killable sleep.
func closed(ch <-chan struct{}) bool { return sched.TryRecv(ch) }

// wakeUp mirrors wake_up_process(): a non-blocking send on a one-slot
// channel (sched.Notify), so a wake-up is never lost and never blocks the
// waker. Sleepers recheck their condition after every wake-up, so extra
// ones are harmless.
func wakeUp(ch chan struct{}) {
	if sched.Active() {
		sched.Notify(ch)
		return
	}
	select {
	case ch <- struct{}{}:
	default:
	}
}
