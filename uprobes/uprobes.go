package uprobes

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"mmlab/cpu"
	"mmlab/design"
	"mmlab/errno"
	"mmlab/kernel"
	"mmlab/locking"
	"mmlab/locking/lockrank"
	"mmlab/mm"
	"mmlab/rcu"
	"mmlab/smp"
)

// Handler return values (include/linux/uprobes.h).
const (
	HandlerRemove = 1 // UPROBE_HANDLER_REMOVE: remove the breakpoint from this mm
	HandlerIgnore = 2 // UPROBE_HANDLER_IGNORE: skip this consumer's ret_handler
)

// Flavor is seed 004's switch: the protection of the hit path ("uprobes:
// switch to RCU Tasks Trace flavor for better performance"). The zero
// Flavor is unset: New refuses it (design.ErrUnset).
type Flavor int

const (
	SRCU       Flavor = iota + 1 // before (v6.12): uprobes_srcu
	TasksTrace                   // after (v6.13+): RCU Tasks Trace
)

// Flavors are both flavours, before first, named "srcu" and "tasks-trace"
// as the rcu flavours and the experiments' variants are.
var Flavors = design.NewSet[Flavor]("uprobes flavour", "srcu", "tasks-trace")

// String returns "srcu" or "tasks-trace".
func (f Flavor) String() string { return Flavors.String(f) }

// MarshalText returns the flavour's name.
func (f Flavor) MarshalText() ([]byte, error) { return Flavors.Marshal(f) }

// UnmarshalText sets f to the flavour named text.
func (f *Flavor) UnmarshalText(text []byte) error { return Flavors.Unmarshal(f, text) }

// Config is a model kernel's uprobes design, chosen at construction. Its
// Flavor, HitPath, Design and Optimize must be set; the zero GP is untimed
// grace periods.
type Config struct {
	Flavor  Flavor        // seed 004: the hit path's protection
	HitPath HitPath       // seed 004's era or today's (hit_v612.go)
	Design  kernel.Design // seed 000: register_for_each_vma and fork (design.go)
	// Optimize is what the first hit of a uprobe on a 5-byte nop makes of
	// it (optimize.go): OptimizeCall, a call to the trampoline, is x86-64's
	// since v6.18.
	Optimize Optimize
	// GP times the grace periods of the flavour, of uretprobes_srcu and of
	// the normal RCU of dup_mmap_sem's rcu_sync (rcu.Timing; zero:
	// untimed).
	GP rcu.Timing
}

// Consumer mirrors struct uprobe_consumer. At least one of Handler and
// RetHandler is set. They run on the hitting task's model thread, inside a
// read section of the protection flavour; they may block only through
// r.Block.
type Consumer struct {
	// Handler runs at the breakpoint, with r.Regs.RIP at the probed
	// address. It returns 0, HandlerRemove or HandlerIgnore.
	Handler func(r *kernel.Runner) int
	// RetHandler runs when the probed function returns, with r.Regs.RIP
	// at the return address; fn is the probed address (the function's
	// entry).
	RetHandler func(fn uint64, r *kernel.Runner)
	// Filter, if set, says whether the consumer wants the breakpoint in
	// m (nil: every mm).
	Filter func(m *mm.MM) bool
}

// wants mirrors consumer_filter().
func (c *Consumer) wants(m *mm.MM) bool { return c.Filter == nil || c.Filter(m) }

// Uprobe mirrors struct uprobe: one probed (inode, offset) and its
// consumers.
type Uprobe struct {
	Inode  *mm.Inode
	Offset uint64

	u *Uprobes

	// registerRwsem is register_rwsem: it serialises register, unregister
	// and apply of this uprobe, i.e. the consumer set against the
	// breakpoints installed. Outermost lock of the package.
	registerRwsem locking.RWSem
	// consumerMu is consumer_rwsem for writers: it protects changes of
	// consumers and the one-time instruction analysis (prepare_uprobe).
	// Order: inside the mmap lock, outside treeLock.
	consumerMu sync.Mutex
	// consumers is the RCU-read consumer list: an immutable slice,
	// replaced under consumerMu, read by the hit path without a lock.
	consumers smp.Pointer[[]*Consumer] // rcu_dereference / rcu_assign_pointer

	// ref is the refcount; 0: dying (put_uprobe). A single-stepped hit
	// writes it twice (pre_ssout()'s try_get_uprobe(), handle_singlestep()'s
	// put_uprobe()), on every CPU, so it has cache lines of its own (128
	// bytes: x86 prefetches line pairs), away from what every hit reads
	// (consumers, copied, orig, insn): in struct uprobe, ->ref is on the
	// first line, ->flags and ->arch lines further on.
	_      [128]byte
	ref    smp.Int32 // refcount_t: locked RMWs
	_      [128]byte
	copied atomic.Bool // UPROBE_COPY_INSN: orig and insn are valid
	freed  atomic.Bool // the free chain (SRCU, then the flavour) ran
	// orig is arch.insn, the original bytes (up to 16); insn is their
	// analysis (arch_uprobe_analyze_insn). Written once, before copied.
	orig [16]byte
	insn cpu.Insn
	// canOptimize is ARCH_UPROBE_FLAG_CAN_OPTIMIZE (can_optimize(), when
	// the Uprobes optimize), written with orig; optimizeFail is
	// ARCH_UPROBE_FLAG_OPTIMIZE_FAIL, set once an optimization failed.
	canOptimize  bool
	optimizeFail atomic.Bool
}

// Freed reports whether the uprobe went through its whole free chain
// (uprobe_free_rcu_tasks_trace ran): no reader can see it any more.
func (up *Uprobe) Freed() bool { return up.freed.Load() }

// Refs returns the uprobe's reference count.
func (up *Uprobe) Refs() int64 { return int64(up.ref.Load()) }

// Insn returns the analysed original instruction (valid once a breakpoint
// was installed).
func (up *Uprobe) Insn() cpu.Insn { return up.insn }

func (up *Uprobe) String() string {
	return fmt.Sprintf("uprobe %s:%#x", up.Inode.Name, up.Offset)
}

// tryGet mirrors try_get_uprobe(): a reference unless the uprobe is dying.
func (up *Uprobe) tryGet() bool { return incNotZero(&up.ref) }

// incNotZero mirrors refcount_inc_not_zero() and atomic_inc_not_zero(): it
// adds one to v unless v is 0, and reports whether it did. On a shared
// word (package smp) it is a READ_ONCE, then cmpxchg until it succeeds, as
// refcount_inc_not_zero() does.
func incNotZero[V int32Counter](v V) bool {
	for {
		n := v.Load()
		if n == 0 {
			return false
		}
		if v.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// int32Counter is a counter incNotZero takes: *atomic.Int32 or a shared
// word, *smp.Int32.
type int32Counter interface {
	Load() int32
	CompareAndSwap(old, new int32) bool
}

// put mirrors put_uprobe() and uprobe_free_deferred(): the last reference
// erases the uprobe from the tree (if it is still there) and frees it after
// a grace period of uretprobes_srcu and then one of the hit path's flavour
// (put_uprobe, uprobe_free_rcu_tasks_trace); v6.12 has no uretprobes_srcu:
// after one of the flavour.
func (up *Uprobe) put() {
	if up.ref.Add(-1) != 0 {
		return
	}
	u := up.u
	u.treeLock.Lock()
	u.treeSeq.WriteBegin()
	t := *u.tree.Load()
	if i, ok := search(t, up.Inode.Ino, up.Offset); ok && t[i] == up {
		u.tree.Store(ptr(slices.Delete(slices.Clone(t), i, i+1)))
	}
	u.treeSeq.WriteEnd()
	u.treeLock.Unlock()
	free := func() { u.flavor.Call(func() { up.freed.Store(true) }) }
	if u.hitPath == HitPathV612 {
		free()
		return
	}
	u.uretSRCU.Call(free)
}

// filterChain mirrors filter_chain(): does any consumer want m?
func (up *Uprobe) filterChain(m *mm.MM) bool {
	for _, c := range *up.consumers.Load() {
		if c.wants(m) {
			return true
		}
	}
	return false
}

// Wants reports whether a consumer of up wants its breakpoint in m
// (filter_chain(), read-only: for checkers of the model).
func (up *Uprobe) Wants(m *mm.MM) bool { return up.filterChain(m) }

// hasConsumer reports whether c is a consumer of up.
func (up *Uprobe) hasConsumer(c *Consumer) bool {
	return slices.Contains(*up.consumers.Load(), c)
}

// consumerAdd mirrors consumer_add(): list_add_rcu under consumer_rwsem.
func (up *Uprobe) consumerAdd(c *Consumer) {
	up.consumerMu.Lock()
	defer up.consumerMu.Unlock()
	up.consumers.Store(ptr(append([]*Consumer{c}, *up.consumers.Load()...)))
}

// consumerDel mirrors consumer_del(): list_del_rcu.
func (up *Uprobe) consumerDel(c *Consumer) {
	up.consumerMu.Lock()
	defer up.consumerMu.Unlock()
	cs := *up.consumers.Load()
	if i := slices.Index(cs, c); i >= 0 {
		up.consumers.Store(ptr(slices.Delete(slices.Clone(cs), i, i+1)))
	}
}

// Uprobes is the uprobes subsystem of one model kernel: the registry,
// dup_mmap_sem, the protection flavour of the hit path and the machine whose
// CPUs run the probed tasks. It implements mm.Hooks (set it as the Hooks
// of every MM: NewTaskMM does) and kernel.Traps (New installs it as the
// machine's); it gives fork dup_mmap_sem and its design (kernel.Config).
type Uprobes struct {
	machine  *kernel.Machine
	flavor   rcu.Flavor    // the hit path's protection (Config.Flavor)
	hitPath  HitPath       // Config.HitPath
	design   kernel.Design // Config.Design
	uretSRCU *rcu.SRCU     // uretprobes_srcu: return-instance leases (v6.13+)

	// DupMmapSem is dup_mmap_sem: held for write by registerForEachVMA
	// and for read by fork around dup_mmap. Order: inside registerRwsem,
	// outside every mmap lock.
	DupMmapSem locking.PercpuRWSem

	// treeLock is uprobes_treelock for writers of tree; treeSeq is
	// uprobes_seqcount, written inside it. Order: innermost but xolArea.mu.
	treeLock sync.Mutex
	treeSeq  locking.SeqCount
	// tree is uprobes_tree: the uprobes sorted by (inode, offset), an
	// immutable slice replaced under treeLock (see the package comment).
	tree smp.Pointer[[]*Uprobe] // rcu_dereference / rcu_assign_pointer (uprobes_tree's root)

	// mmapMutex is uprobes_mmap_mutex[]: it serialises uprobe_mmap per
	// inode hash. Order: inside the mmap lock, outside consumerMu.
	mmapMutex [13]locking.RWSem

	// xol maps *mm.MM to its *xolArea (mm->uprobes_state.xol_area).
	xol sync.Map

	// opt is Config.Optimize.
	opt Optimize
	// trampMapping is tramp_mapping, the special mapping of every
	// [uprobes-trampoline] VMA; tramps maps *mm.MM to its *trampolines.
	trampMapping *mm.SpecialMapping
	tramps       sync.Map
	// warned and warnings count the WARN_ON_ONCE()s (warnOnce).
	warned   [nWarn]atomic.Bool
	warnings atomic.Int64
	// passes counts the after design's passes.
	passes atomic.Int64

	hooks testHooks // set only by tests (export_test.go)
}

var (
	_ mm.Hooks     = (*Uprobes)(nil)
	_ kernel.Traps = (*Uprobes)(nil)
)

// New returns the uprobes of machine m in the design c chooses, and
// installs it as m's trap handler.
func New(m *kernel.Machine, c Config) (*Uprobes, error) {
	u := &Uprobes{machine: m, uretSRCU: rcu.NewSRCUAt(m.Sys, c.GP), design: c.Design, hitPath: c.HitPath,
		opt: c.Optimize, trampMapping: newTrampMapping(c.Optimize)}
	if err := Flavors.Check(c.Flavor); err != nil {
		return nil, fmt.Errorf("uprobes: %w", err)
	}
	switch c.Flavor {
	case SRCU:
		u.flavor = rcu.NewSRCUAt(m.Sys, c.GP)
	case TasksTrace:
		u.flavor = rcu.NewTasksTraceAt(m.Sys, c.GP)
	}
	for _, err := range []error{Optimizations.Check(c.Optimize), kernel.Designs.Check(c.Design), HitPaths.Check(c.HitPath)} {
		if err != nil {
			return nil, fmt.Errorf("uprobes: %w", err)
		}
	}
	u.tree.Init("uprobes_tree")
	u.treeSeq.SetName("uprobes_seqcount")
	u.tree.Store(new([]*Uprobe))
	u.DupMmapSem.SetName("dup_mmap_sem", m.Sys.NumCPU())
	u.DupMmapSem.SetClass(lockrank.DupMmapSem)
	u.DupMmapSem.SetRCUSync(rcu.NewClassicAt(m.Sys, c.GP)) // percpu_init_rwsem()
	for i := range u.mmapMutex {
		u.mmapMutex[i].SetName("uprobes_mmap_mutex")
		u.mmapMutex[i].SetClass(lockrank.UprobesMmapMutex)
	}
	if c.Design == kernel.DesignAfter {
		m.Sys.ExemptLockOrder(lockrank.Seed000After)
	}
	m.Traps = u
	return u, nil
}

// Machine returns the machine.
func (u *Uprobes) Machine() *kernel.Machine { return u.machine }

func ptr[T any](v T) *T { return &v }

// search finds (ino, off) in the sorted t: its index, or where it would go.
func search(t []*Uprobe, ino, off uint64) (int, bool) {
	lo, hi := 0, len(t)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		p := t[mid]
		if p.Inode.Ino < ino || p.Inode.Ino == ino && p.Offset < off {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, lo < len(t) && t[lo].Inode.Ino == ino && t[lo].Offset == off
}

// findUprobeRCU mirrors find_uprobe_rcu(): a lockless lookup. A uprobe found
// is trusted; a miss only if no writer changed the tree meanwhile. The
// caller is inside a read section (or holds a reference it got here).
func (u *Uprobes) findUprobeRCU(in *mm.Inode, off uint64) *Uprobe {
	for {
		seq := u.treeSeq.ReadBegin()
		t := *u.tree.Load()
		if i, ok := search(t, in.Ino, off); ok {
			return t[i]
		}
		if !u.treeSeq.ReadRetry(seq) {
			return nil
		}
	}
}

// Lookup returns the uprobe at (in, off) if there is one (for tests and
// tools: find_uprobe_rcu outside the hit path).
func (u *Uprobes) Lookup(in *mm.Inode, off uint64) *Uprobe { return u.findUprobeRCU(in, off) }

// Len returns the number of uprobes in the tree.
func (u *Uprobes) Len() int { return len(*u.tree.Load()) }

// noEvents mirrors no_uprobe_events().
func (u *Uprobes) noEvents() bool { return len(*u.tree.Load()) == 0 }

// alloc mirrors alloc_uprobe() and insert_uprobe(): the uprobe at (in,
// off) with a reference for the caller, inserted if there is none; a dying
// one in its place is replaced.
func (u *Uprobes) alloc(in *mm.Inode, off uint64) *Uprobe {
	nu := &Uprobe{Inode: in, Offset: off, u: u}
	nu.ref.Init("uprobe.ref")
	nu.consumers.Init("uprobe.consumers")
	nu.ref.Store(1)
	nu.consumers.Store(new([]*Consumer))
	nu.registerRwsem.SetName("register_rwsem")
	nu.registerRwsem.SetClass(lockrank.RegisterRwsem)
	u.treeLock.Lock()
	defer u.treeLock.Unlock()
	t := *u.tree.Load()
	i, ok := search(t, in.Ino, off)
	if ok && t[i].tryGet() {
		return t[i]
	}
	u.treeSeq.WriteBegin()
	if ok {
		nt := slices.Clone(t)
		nt[i] = nu // the dying one is erased, its put finds it gone
		u.tree.Store(&nt)
	} else {
		u.tree.Store(ptr(slices.Insert(slices.Clone(t), i, nu)))
	}
	u.treeSeq.WriteEnd()
	return nu
}

// Register mirrors uprobe_register(): add consumer c to the uprobe at
// (in, offset), creating it, and install the breakpoint in every mm that
// maps that file page and that c's filter accepts. w is the registering
// task (nil for a plain goroutine). On error nothing stays registered.
func (u *Uprobes) Register(w locking.Waiter, in *mm.Inode, offset uint64, c *Consumer) (*Uprobe, error) {
	if c == nil || c.Handler == nil && c.RetHandler == nil {
		return nil, errno.EINVAL
	}
	if offset > in.Size {
		return nil, errno.EINVAL
	}
	up := u.alloc(in, offset)
	up.registerRwsem.DownWrite(w)
	up.consumerAdd(c)
	err := u.registerForEachVMA(w, up, c)
	up.registerRwsem.UpWrite()
	if err != nil {
		_ = u.UnregisterNosync(w, up, c)
		u.UnregisterSync(w)
		return nil, err
	}
	return up, nil
}

// UnregisterNosync mirrors uprobe_unregister_nosync(): remove c and the
// breakpoint from every mm no remaining consumer wants, and drop c's
// reference. c's handlers may still be running; UnregisterSync waits for
// them. If a removal fails the uprobe is leaked, as the kernel does
// ("unregister, leaking uprobe"), and the error returned.
func (u *Uprobes) UnregisterNosync(w locking.Waiter, up *Uprobe, c *Consumer) error {
	up.registerRwsem.DownWrite(w)
	up.consumerDel(c)
	err := u.registerForEachVMA(w, up, nil)
	up.registerRwsem.UpWrite()
	if err != nil {
		return fmt.Errorf("uprobes: unregister %v, leaking uprobe: %w", up, err)
	}
	up.put()
	return nil
}

// UnregisterSync mirrors uprobe_unregister_sync(): after it returns no
// handler of a consumer removed before it runs. A model task (a
// locking.Blocker) waits inside Block, giving up its CPU. v6.12 waits for
// the flavour only (uretprobes_srcu came with v6.13).
func (u *Uprobes) UnregisterSync(w locking.Waiter) {
	wait := func() {
		u.flavor.Synchronize()
		if u.hitPath != HitPathV612 {
			u.uretSRCU.Synchronize()
		}
	}
	if b, ok := w.(locking.Blocker); ok {
		b.Block(wait)
		return
	}
	wait()
}

// Apply mirrors uprobe_apply(): if c is still a consumer of up, install
// (add) or remove (!add) the breakpoints as c's filter now says; errno.ENOENT
// if it is not. The consumers are walked, and the breakpoints written, in a
// read section of the flavour (seed 004's diff), on w's model thread; a
// caller that is not on one takes no read section, a model limit (the
// flavours track readers per model thread), harmless since register_rwsem,
// held for write, keeps the uprobe's consumers from changing meanwhile.
func (u *Uprobes) Apply(w locking.Waiter, up *Uprobe, c *Consumer, add bool) error {
	up.registerRwsem.DownWrite(w)
	defer up.registerRwsem.UpWrite()
	if th := rcu.ThreadOf(w); th != nil {
		idx := u.flavor.ReadLock(th)
		defer func() { u.flavor.ReadUnlock(th, idx) }()
	}
	if !up.hasConsumer(c) {
		return errno.ENOENT
	}
	if add {
		return u.registerForEachVMA(w, up, c)
	}
	return u.registerForEachVMA(w, up, nil)
}
