package locking

import (
	"sync"

	"mmlab/sched"
)

// GracePeriods is the normal RCU a RCUSync waits on (rcu.Classic
// implements it): Synchronize waits for a grace period, Call runs fn after
// one.
type GracePeriods interface {
	Synchronize()
	Call(fn func())
}

// The states of an RCUSync (kernel/rcu/sync.c), in the kernel's order:
// readers take their fast path only in rssIdle.
const (
	rssIdle   = iota // GP_IDLE: no writer for a grace period
	rssEnter         // GP_ENTER: the first writer waits for a grace period
	rssPassed        // GP_PASSED: a grace period has passed, writers go ahead
	rssExit          // GP_EXIT: the last writer left, a callback is pending
	rssReplay        // GP_REPLAY: a writer came and left again meanwhile
)

// RCUSync mirrors struct rcu_sync (kernel/rcu/sync.c): it tells the readers
// of a PercpuRWSem whether they may take their fast path. A writer after an
// idle period waits for one normal grace period (rcu_sync_enter), after
// which every reader sees the slow path; readers go back to the fast path a
// grace period after the last writer left (rcu_sync_exit and the callback
// rcu_sync_func).
type RCUSync struct {
	gp GracePeriods

	// mu is rss_lock: it protects state, count and wait. Taken before the
	// grace periods' own locks (gp.Call), never while waiting.
	mu    sync.Mutex
	state int
	count int           // gp_count: writers inside enter..exit
	wait  chan struct{} // gp_wait: closed when the state reaches rssPassed
}

// newRCUSync returns an idle RCUSync on gp.
func newRCUSync(gp GracePeriods) *RCUSync { return &RCUSync{gp: gp} }

// isIdle mirrors rcu_sync_is_idle(): may readers take the fast path?
func (r *RCUSync) isIdle() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state == rssIdle
}

// enter mirrors rcu_sync_enter(): the first writer after an idle period
// waits for a grace period itself (synchronize_rcu(), then
// rcu_sync_func()); a writer that comes while another waits sleeps until
// the state is rssPassed; a writer that comes before the exit callback ran
// goes ahead at once.
func (r *RCUSync) enter(w Waiter) {
	r.mu.Lock()
	st := r.state
	if st == rssIdle {
		r.state = rssEnter
		r.wait = make(chan struct{})
	}
	r.count++
	ch := r.wait
	r.mu.Unlock()
	if st == rssIdle {
		sleep(w, r.gp.Synchronize)
		r.fn()
		return
	}
	if st == rssEnter {
		sleep(w, func() { sched.Wait(r, "rcu_sync_enter", ch, nil) })
	}
}

// exit mirrors rcu_sync_exit(): the last writer out queues the callback
// that returns the readers to the fast path after a grace period, or, if
// one is still pending, has it wait for one more.
func (r *RCUSync) exit() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.count--; r.count > 0 {
		return
	}
	switch r.state {
	case rssPassed:
		r.state = rssExit
		r.gp.Call(r.fn)
	case rssExit:
		r.state = rssReplay
	}
}

// fn mirrors rcu_sync_func(), which runs a grace period after the
// transition that queued it: writers inside go to rssPassed; a replay
// queues itself again; otherwise the readers go back to the fast path.
func (r *RCUSync) fn() {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.count > 0:
		if r.state == rssEnter {
			sched.Close(r.wait)
		}
		r.state = rssPassed
	case r.state == rssReplay:
		r.state = rssExit
		r.gp.Call(r.fn)
	default:
		r.state = rssIdle
	}
}

// tryEnter is enter for DownWriteTrylock, which never sleeps: it succeeds
// only if no grace period needs waiting for (a writer is inside or left
// less than a grace period ago).
func (r *RCUSync) tryEnter() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state == rssIdle || r.state == rssEnter {
		return false
	}
	r.count++
	return true
}

// SetRCUSync gives s an rcu_sync on the normal grace periods gp (the
// kernel's percpu_init_rwsem() always has one). Call it before the lock is
// shared.
func (s *PercpuRWSem) SetRCUSync(gp GracePeriods) { s.rss = newRCUSync(gp) }

// ReaderFastPath reports whether readers take the fast path
// (rcu_sync_is_idle(); always, without an rcu_sync).
func (s *PercpuRWSem) ReaderFastPath() bool { return s.rss == nil || s.rss.isIdle() }
