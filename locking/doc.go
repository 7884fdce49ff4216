// Package locking models the kernel's sleeping locks (kernel/locking): the
// reader-writer semaphore with its fairness rules (rwsem.c), the per-CPU
// reader-writer semaphore (percpu-rwsem.c) and the sequence counter
// (include/linux/seqlock.h).
//
// Tasks block in real goroutines, on channels. A lock sees a task only through
// the Waiter interface (is a fatal signal pending? which model CPU?), and, if
// the task also implements BlockRecorder, tells it how long it was blocked on
// which lock. Every lock also keeps its own statistics (LockStats).
//
// Lock order: these are leaf primitives. Each lock's internal wait_lock is
// innermost: nothing else is taken while it is held, and no Waiter or
// BlockRecorder method is called under it. Callers order the locks themselves
// (see mm and uprobes); a lock is never taken recursively.
//
// Left out on purpose: optimistic spinning (rwsem_optimistic_spin). The
// per-CPU semaphore's rcu_sync (RCUSync, rcu_sync.go) keeps the writer's
// grace-period wait but not the readers' barrier-free fast path (see
// PercpuRWSem).
package locking
