// Package uprobes models kernel/events/uprobes.c with arch/x86/kernel/uprobes.c:
// user-space breakpoints on (inode, offset), installed as a real 0xCC byte
// in a copy-on-write text page of every process that maps the file, hit by
// the model CPU (package cpu) that runs the task's code, and handled on the
// task's model thread.
//
// # Pieces
//
//   - The registry: uprobes keyed by (inode, offset) in a global ordered
//     structure read without locks (find_uprobe_rcu) under a sequence count
//     (uprobes_seqcount), written under a tree lock (uprobes_treelock). The
//     kernel's rb-tree is here an immutable sorted slice replaced as a whole
//     by writers (copy-on-write), which is what lets lock-free readers be
//     race-free in Go; a miss is trusted only if the sequence did not move,
//     as in the kernel.
//   - Register, UnregisterNosync, UnregisterSync and Apply, with
//     registerForEachVMA, the one function that walks the file's i_mmap
//     under dup_mmap_sem (write) and takes each mm's mmap write lock to
//     install or remove the breakpoint (mm.UprobeWrite: copy-on-write, the
//     page cache untouched; removal restores the original byte and, as
//     v6.16+ does, zaps the anonymous copy when it equals the file's page).
//   - The mm hooks (mm.Hooks): MmapFile (uprobe_mmap: a new mapping of a
//     probed file gets its breakpoints), Munmap, DupMmap (fork: the
//     breakpoints come with the copied anonymous text page, fork copies the
//     page tables of a VMA with an anon_vma), Exit; and NewTaskMM, whose
//     processes give fork (kernel.Config) dup_mmap_sem, which it takes for
//     read, and the design it runs in.
//   - The hit path (kernel.Traps): int3 → the VMA found without the mmap
//     lock (mmap_lock speculation, v6.14+; under it on the v6.12 hit path)
//     and the uprobe in the registry →
//     the consumers' handlers under the chosen protection → the original
//     instruction emulated (nop, push, call, jmp, jcc) or single-stepped out
//     of line in a slot of the [uprobes] page. A breakpoint with no uprobe
//     behind it delivers SIGTRAP.
//   - x86-64 optimized uprobes (v6.18+, optimize.go): a uprobe on a 5-byte
//     nop is installed as an int3; its first hit, after the handlers and
//     under the mmap write lock, rewrites it into "call rel32" to the mm's
//     [uprobes-trampoline] page (the nearest free page, found by
//     vm_unmapped_area's two searches; VM_DONTCOPY, so a forked child has
//     the call but not the trampoline), in int3_update's checked writes,
//     each followed by a text-poke sync IPI (kernel.Machine.TextPokeSync).
//     The interpreter runs the trampoline, whose syscall is the uprobe
//     syscall (Syscall): the handlers run without a trap, single-step or
//     emulation. Removal takes three writes (int3, the original tail, the
//     original first byte); where a kill stops it depends on the design.
//     Config.Optimize turns the optimization off, or chooses the proposed
//     jmp-slot design: a jmp to a slot that steps over the red zone, and a
//     syscall that returns straight to the site + 5.
//   - Uretprobes: the return address is swapped for the trampoline (slot 0
//     of the XOL page), a per-task stack of return instances records the
//     original one; nested, recursive and chained (tail) calls. The
//     trampoline is the kernel's compat one, a bare int3 that handle_swbp
//     recognises by its address, rather than x86-64's push/syscall/pop
//     sequence and sys_uretprobe: the return costs one trap either way.
//
// # The switch (seed 004)
//
// Config.Flavor, given to New, makes the hit path's protection an
// rcu.Flavor: "srcu" (v6.12: per-CPU counters and two full barriers per
// read section) or "tasks-trace" (v6.13+: a plain per-task nesting count).
// Config.HitPath chooses the hit path around it (hit_v612.go): today's
// (v6.14+) or the seed's own, v6.12 as patches 1-7 of "uprobes:
// RCU-protected hot path optimizations" left it, the mmap read lock taken
// on every hit and each return instance allocated and holding a reference
// on its uprobe. Variants names the three kernels the experiments compare:
// "srcu" and "tasks-trace" (the seed's era) and "v6.14+".
// UnregisterSync waits for a grace period of the flavour, and, on today's
// path, then of uretprobes_srcu, the SRCU domain whose read lock a pending
// return instance holds as its lease on the uprobe (v6.13+ hprobe, without
// the 100 ms timer that converts long leases to references: a model
// function that never returns delays UnregisterSync). Config.GP times the
// grace periods, and those of dup_mmap_sem's rcu_sync, as the kernel's
// (rcu.Timing).
//
// # The switch (seed 000)
//
// Config.Design (kernel.Design, which fork shares), given to New, chooses
// how register_for_each_vma and fork (through the kernel.Config of the
// processes NewTaskMM makes) meet busy mmap locks (design.go).
// kernel.DesignBefore is v6.19: each mm's mmap write lock is slept on with
// dup_mmap_sem held for write, fork sleeps on the parent's under it for
// read and tears a failed child down inside it, the child's task gets its
// mm only after its VMAs are in i_mmap, a killed unregistering task leaks
// the uprobe and the breakpoints it did not reach, and a removal of an
// optimized uprobe stopped half-way stays so (the site "int3 + the call's
// displacement" is later restored by its first byte only: a corrupted
// instruction), with WARN_ON_ONCE counted (Warnings). kernel.DesignAfter is
// the seed's patches 1-8: only trylocks under dup_mmap_sem; a busy mm is
// waited for outside it, its lock kept, and the pass redone; teardown
// outside; a half-written optimized site is finished; no warning for a
// killed task; tsk->mm set first; removal completes for a killed task.
//
// # Text changes reach the CPUs
//
// A breakpoint write clears the PTE, runs a TLB shootdown
// (kernel.Machine.FlushTLB: an IPI to every model CPU, whose handler flushes
// the interpreter of a task of that mm), writes, and sets the PTE again. So
// no interpreter reads a page while it is written, which is also what keeps
// the model clean for the race detector (see kernel.Machine). A PTE that
// was not present needs no shootdown: no CPU can have cached it.
//
// # Lock order (outermost first)
//
// Each line starts with a lock class of package mmlab/locking/lockrank,
// whose Order this tree must agree with (lockrank's tests check it, and
// runs built with -tags invariants check each acquisition); a line nests
// inside the nearest line above it that is indented less:
//
//	register_rwsem                Uprobe.registerRwsem: register, unregister, apply (W)
//	  rcu_gp_mutex                dup_mmap_sem's rcu_sync_enter waits for a grace period
//	  dup_mmap_sem                Uprobes.DupMmapSem: registerForEachVMA (W), fork (R)
//	    i_mmap_rwsem              Inode.IMmapRwsem (R): build_map_info, dropped before any mmap lock
//	    mmap_lock                 MM.MmapLock (W) for every breakpoint write
//	      uprobes_mmap_mutex      Uprobes.mmapMutex[i] (uprobe_mmap)
//	        consumer_rwsem        Uprobe.consumerMu (writers; prepare_uprobe)
//	          uprobes_treelock    Uprobes.treeLock: uprobes_treelock + uprobes_seqcount (writers)
//	            xol_area          xolArea.mu, the XOL slot bitmap (leaf)
//	uprobes_srcu                  the hit path's read section of the flavour (SRCU or Tasks Trace)
//	  mmap_lock                   read: the slow lookup; write: the XOL area, unapply, the first-hit optimization
//
// The after design (seed 000) breaks this order on purpose and says so
// (lockrank.Seed000After): register_for_each_vma's next pass takes
// dup_mmap_sem for write holding the mmap locks of the mms it waited for,
// several at once, in mm order; under dup_mmap_sem it only trylocks an mmap
// lock, as fork does.
//
// An mm's trampoline list (head_tramps) and, in the jmp-slot design, its
// slot assignments are protected by its mmap write lock; the uprobe
// syscall reads the slot table without it (atomic words).
//
// The hit path holds none of these across its lookups: it runs inside a
// read section of the flavour, and may take the mmap lock inside it.
//
// # Known model limits
//
// The speculative lookup reads vm_pgoff of the VMA it found without a lock,
// as the kernel does, and discards it if the mm's lock sequence moved; Go's
// race detector would flag that read only if a probed text VMA were split or
// merged while it is hit, which no test does. uprobe_mmap's breakpoint
// write sends its shootdown without knowing the caller; a model task that
// maps a probed file over pages already present in its own mm would IPI its
// own CPU (it cannot happen for a fresh mapping, whose PTEs are not
// present). A fork does not copy pending return instances (dup_utask) nor
// recreate the XOL page in the child (dup_xol_work). ref_ctr (USDT),
// session cookies and the shadow stack checks of the uprobe syscall are not
// modelled. A real CPU pays for an int3 (exception entry, the DIE_INT3
// notifier, the return-to-user work loop, iret) more than for a syscall and
// sysret, and little for the trampoline's eight instructions; the model's
// interpreter pays per instruction and nothing for a trap, so an optimized
// hit costs it more than an int3 hit (BenchmarkUprobeHit), in both
// optimizing designs. The jmp-slot design follows the proposal's cover
// letter; where it is silent (fork, a syscall from an unassigned slot, slot
// reuse) optimize.go names the model's choice.
package uprobes
