// Package smp is the model's shared memory: the words that model CPUs
// share, with the kernel's kinds of access (include/asm-generic/rwonce.h's
// READ_ONCE and WRITE_ONCE, include/linux/atomic.h's atomic_*() locked
// read-modify-writes, include/asm-generic/barrier.h's smp_mb()), and in a
// sim run the cache lines they sit on. It is named for the kernel's smp_*
// operations and its CONFIG_SMP world, where these accesses are what one
// CPU sees of another; "cacheline" would name only the sim half.
//
// # Words
//
// Int64, Uint64, Int32, Uint32, Bool and Pointer[T] are sync/atomic's
// types with the kernel's kinds of access: Load is READ_ONCE (a plain
// load), Store WRITE_ONCE (a plain store), Add, Sub, CompareAndSwap, Swap,
// And and Or a locked read-modify-write (LOCK XADD, LOCK CMPXCHG, XCHG);
// Mb is smp_mb(). A word is registered with a name and a line (Init,
// InitOn): "mmap_lock.count" on a line of its own, or words that share a
// line (struct rw_semaphore's count and owner in most rwsems) on one Line.
// The zero value is usable: a word never registered is, in a sim run, on
// a line of its own named after its type.
//
// # Real-time and deterministic mode
//
// An access is the sync/atomic operation plus one test of
// sched.SimRunning (a global atomic load, plain on x86-64): no dynamic
// dispatch, no allocation, the word's value where sync/atomic keeps it.
// Each method inlines (Bool's Store, Swap and CompareAndSwap are a static
// call), but its cost to the inliner is some 75 of the 80 it allows a
// function, so a small function that makes two accesses no longer inlines
// into its callers.
//
// # Sim mode
//
// In a sim run (sched.SimConfig) whose SimConfig.Machine is set, each line
// has a coherence state: one owner CPU holding it modified, or a set of
// sharers holding it shared. An access from CPU c:
//   - a load that c holds (owner or sharer) costs nothing (an L1 hit); a
//     load that misses takes the line from its owner, or from the nearest
//     sharer, and the owner becomes a sharer (MSI's M→S);
//   - a store or locked RMW that c does not own takes the line exclusive:
//     from its owner, or invalidating the sharers (the farthest one's
//     distance); c becomes the owner;
//   - a transfer costs the machine's one-way hand-off for the topological
//     distance between the two CPUs (machine.Costs.LineSMT, LineLLC,
//     LineSocket, LineRemote), CPUs numbered as x86 Linux enumerates a
//     multi-socket Intel server: the first thread of every core of every
//     socket, socket by socket, then the second threads;
//   - lines serialise: a line in flight is busy until it arrives, and a
//     second requester queues behind it (start = max(now, busy)), the
//     queueing of Boyd-Wickizer et al., "Non-scalable locks are
//     dangerous" (2012);
//   - a plain store does not wait: it is posted (a store buffer without a
//     capacity), the line still moves and stays busy until it arrives,
//     and the CPU's next locked RMW or smp_mb() waits for its posted
//     stores to arrive (a locked instruction drains the store buffer);
//   - a locked RMW or smp_mb() pays machine.Costs.LockedRMW on a line it
//     owns; on a line it takes from another CPU the transfer's cost alone
//     (the published hand-off figures include the compare-and-swap).
//
// The requester waits with sched.Stall, which never schedules (a word may
// be accessed under a host lock): an access is atomic with respect to the
// other CPUs, and between two preemption points a thread may run ahead of
// their clocks by its stalls, as a Charge does. Accesses from outside the
// running thread (Run's goroutine, setup before Run) cost nothing and
// move no line. Without SimConfig.Machine lines move at no cost (the
// profile still counts them).
//
// Left out: cold misses and DRAM (a line no CPU holds is had for free),
// capacity and conflict evictions, the home directory's or snoop filter's
// place (a transfer costs the distance between the two CPUs only),
// MESI's exclusive and forwarding states (a lone sharer upgrades for
// free), prefetch, store-to-load forwarding as a reordering (a posted
// store is visible at once: sequential consistency), the store buffer's
// capacity, and false sharing except as the model declares it (words
// share a line only by InitOn).
//
// # The contention profile
//
// C2C returns, for a sim System, the lines that moved between CPUs, named
// by their words, with the transfers per access, the CPUs they came from,
// what they cost and how long requesters queued: what perf c2c's "Shared
// Data Cache Line Table" gives for the kernel. Profile.Format prints it.
//
// The state has no lock: only the running thread of the (single) active
// sim run touches it, and the run's baton hand-offs order those accesses.
package smp
