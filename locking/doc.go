// Package locking models the kernel's sleeping locks (kernel/locking): the
// reader-writer semaphore with its fairness rules (rwsem.c), the per-CPU
// reader-writer semaphore (percpu-rwsem.c) and the sequence counter
// (include/linux/seqlock.h), and a plain sleeping mutex (Mutex) for the
// model's own slow paths.
//
// Tasks block in real goroutines, on channels, through sched.Wait and
// sched.Notify, so that under sched's deterministic mode a sleeper becomes
// runnable only when woken; every lock operation is a preemption point
// there (sched.At) and reports what the running thread holds
// (sched.Acquired, sched.Released). The clock of the handoff timeout and of
// the wait accounting is sched.Now (virtual in a deterministic run). A lock
// sees a task only through
// the Waiter interface (is a fatal signal pending? which model CPU?), and, if
// the task also implements BlockRecorder, tells it how long it was blocked on
// which lock. Every lock also keeps its own statistics (LockStats).
//
// Lock order: these are leaf primitives. Each lock's internal wait_lock is
// innermost: nothing else is taken while it is held, and no Waiter or
// BlockRecorder method is called under it. Callers order the locks themselves
// (see mm and uprobes); a lock is never taken recursively. The order between
// locks is declared once, in package lockrank: a lock's class (SetClass)
// ranks it there, and a deterministic run built with -tags invariants
// checks each acquisition against lockrank.Order (a trylock excepted, as
// lockdep does; DownWriteNested takes a second lock of a class at a higher
// subclass).
//
// Left out on purpose: a writer's optimistic spinning on a writer that owns
// an RWSem (only spinning on readers is kept), and any spinning in a
// deterministic run. The per-CPU semaphore's rcu_sync (RCUSync,
// rcu_sync.go) keeps the writer's grace-period wait but not the readers'
// barrier-free fast path (see PercpuRWSem).
package locking
