package locking_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mmlab/errno"
	"mmlab/locking"
	"mmlab/sched"
)

// task is a minimal Waiter and BlockRecorder.
type task struct {
	name  string
	cpu   int
	fatal chan struct{}
	kill  sync.Once

	mu      sync.Mutex
	blocked map[string][]time.Duration // protected by mu
}

func newTask(name string) *task {
	return newTaskOn(name, -1)
}

// newTaskOn returns a task that runs on model CPU cpu (-1: none).
func newTaskOn(name string, cpu int) *task {
	return &task{name: name, cpu: cpu, fatal: make(chan struct{})}
}

func (t *task) Fatal() <-chan struct{} { return t.fatal }
func (t *task) CPU() int               { return t.cpu }
func (t *task) Kill()                  { t.kill.Do(func() { close(t.fatal) }) }

func (t *task) RecordBlocked(lock string, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.blocked == nil {
		t.blocked = map[string][]time.Duration{}
	}
	t.blocked[lock] = append(t.blocked[lock], d)
}

func (t *task) waits(lock string) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]time.Duration(nil), t.blocked[lock]...)
}

var (
	_ locking.Waiter        = (*task)(nil)
	_ locking.BlockRecorder = (*task)(nil)
)

// waitFor yields until cond holds. A step that never comes is caught by the
// test binary's -timeout, not by a threshold here.
func waitFor(cond func() bool) {
	for !cond() {
		runtime.Gosched()
	}
}

// mustPanic runs f and fails the test, naming what, if f does not panic.
func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

// op runs f in a goroutine; done is closed when f returns.
type op struct {
	done chan struct{}
	err  error
}

func start(f func() error) *op {
	o := &op{done: make(chan struct{})}
	go func() {
		defer close(o.done)
		o.err = f()
	}()
	return o
}

func (o *op) finished() bool { return sched.TryRecv(o.done) }

func (o *op) wait() error {
	<-o.done
	return o.err
}

// queued waits until the lock's queue holds n waiters.
func queued(s interface{ Waiters() int }, n int) {
	waitFor(func() bool { return s.Waiters() == n })
}

// startQueued starts f, which must block on s, and returns once s's queue
// holds n waiters.
func startQueued(s interface{ Waiters() int }, n int, f func()) *op {
	o := start(nilErr(f))
	queued(s, n)
	return o
}

// kinds returns the queue as a string of 'r' and 'w', head first.
func kinds(s *locking.RWSem) string {
	var b []byte
	for _, q := range s.QueueSnapshot() {
		if q.Write {
			b = append(b, 'w')
		} else {
			b = append(b, 'r')
		}
	}
	return string(b)
}

// fakeClock is a settable clock for the handoff timeout.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }
func newFakeClock() *fakeClock               { c := &fakeClock{}; c.ns.Store(1e18); return c }
func nilErr(f func()) func() error           { return func() error { f(); return nil } }
func mustFinish(t *testing.T, o *op, what string) {
	t.Helper()
	if err := o.wait(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// stressWorkers runs worker(g) for each g below n, in n goroutines at once,
// and returns when all have returned.
func stressWorkers(n int, worker func(g int)) {
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() { worker(g) })
	}
	wg.Wait()
}

// mustEINTR waits for o and fails unless it returned errno.EINTR.
func mustEINTR(t *testing.T, o *op, what string) {
	t.Helper()
	if err := o.wait(); !errors.Is(err, errno.EINTR) {
		t.Fatalf("%s: err %v, want EINTR", what, err)
	}
}

// exclusion counts the readers and writers inside a lock in a stress test
// and remembers the first moment a reader and a writer, or two writers,
// were inside together.
type exclusion struct {
	readers, writers atomic.Int64
	bad              atomic.Value // [2]int64{readers, writers} when violated
}

func (x *exclusion) check(write bool) {
	r, w := x.readers.Load(), x.writers.Load()
	if write && (r != 0 || w != 1) || !write && w != 0 {
		x.bad.Store([2]int64{r, w})
	}
}

// inRead is a reader's critical section.
func (x *exclusion) inRead() { x.readers.Add(1); x.check(false); x.readers.Add(-1) }

// inWrite is a writer's critical section.
func (x *exclusion) inWrite() { x.writers.Add(1); x.check(true); x.writers.Add(-1) }

// mustHaveExcluded fails if readers and writers were ever inside at once.
func (x *exclusion) mustHaveExcluded(t *testing.T) {
	t.Helper()
	if v := x.bad.Load(); v != nil {
		t.Fatalf("readers/writers inside at once: %v", v)
	}
}

// mustHaveBlocked fails unless both cpuTasks slept through Block.
func mustHaveBlocked(t *testing.T, reader, writer *cpuTask) {
	t.Helper()
	if reader.blocks.Load() == 0 || writer.blocks.Load() == 0 {
		t.Fatalf("Block calls: reader %d, writer %d; want both > 0", reader.blocks.Load(), writer.blocks.Load())
	}
}

// cpuTask is a task on a model CPU: it sleeps through Block.
type cpuTask struct {
	*task
	blocks atomic.Int64
}

func (t *cpuTask) Block(wait func()) {
	wait()
	t.blocks.Add(1)
}

var _ locking.Blocker = (*cpuTask)(nil)
