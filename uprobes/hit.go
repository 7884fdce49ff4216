package uprobes

import (
	"math/bits"
	"sync"

	"mmlab/cpu"
	"mmlab/errno"
	"mmlab/kernel"
	"mmlab/locking"
	"mmlab/mm"
	"mmlab/mm/pgtable"
	"mmlab/rcu"
	"mmlab/sched"
	"mmlab/smp"
)

// x86 uprobe constants (arch/x86/include/asm/uprobes.h, kernel/events).
const (
	xolSlotBytes  = 128 // UPROBE_XOL_SLOT_BYTES
	xolSlots      = pgtable.PageSize / xolSlotBytes
	maxURetDepth  = 64 // MAX_URETPROBE_DEPTH
	sigill        = kernel.Signal(4)
	xolAreaFlags  = mm.VM_EXEC | mm.VM_MAYEXEC | mm.VM_DONTCOPY | mm.VM_IO
	xolAreaName   = "[uprobes]"
	trampolineOff = 0 // slot 0 holds the uretprobe trampoline
)

// The kernel software of a hit, in instructions beyond the entry and exit
// of its trap or system call (which machine.Costs.Int3 and Syscall price),
// charged on a simulated machine at machine.Costs.KernelInstruction
// (sched.ChargeKernelInstructions: nothing where the machine has no such
// figure). Counted, not timed, by docs/repro/kernel-instructions.sh: Debian's
// 6.18.15 and 6.12.117 cloud kernels booted in QEMU's TCG with -icount
// shift=0 (one guest instruction per nanosecond of guest time), one CPU,
// lsm=lockdown,capability,landlock,bpf, running this repository's trigger
// experiment (--target live --cpus 1, one BPF program on a uprobe_multi
// link) and a getpid(2) loop. A count is the trigger loop's instructions
// per call with the probe, less the loop's without it (5.0), less one
// getpid() round trip (284.3 on 6.18, 307.2 on 6.12) per kernel entry
// (docs/kernel-instruction-counts.md). Model choices: a hit is charged its
// count whatever its consumers (the counted one had one BPF program), each
// count at once where the model's handler starts (a uretprobe's
// prepare_uretprobe() share too, at the return).
const (
	// swbpInstructions* are handle_swbp() on a uprobe on a nop
	// (uprobe-nop: 995.0 instructions per call on 6.12, 1066.1 on 6.18):
	// the lookup, handler_chain() and its consumer, the nop's emulation.
	swbpInstructionsV612  = 683
	swbpInstructionsToday = 777
	// retInstructions* are what a uretprobe adds besides its second kernel
	// entry (uretprobe-nop: 1988.1 per call on 6.12, 1923.1 on 6.18):
	// prepare_uretprobe() at the hit, then the return through the
	// trampoline (x86-64's uretprobe syscall and
	// uprobe_handle_trampoline(); the model's trampoline is an int3).
	retInstructionsV612  = 686
	retInstructionsToday = 573
	// sysUprobeInstructions is the uprobe syscall of an optimized uprobe
	// on a 5-byte nop (uprobe-nop5 on 6.18, 1161.4 per call; 6.12 does
	// not optimize): the trampoline's own instructions, sys_uprobe() and
	// handle_syscall_uprobe(). The model charges it to the jmp-slot
	// design's syscall too.
	sysUprobeInstructions = 872
)

// hitInstructions returns the counts of u's hit path: a handle_swbp() and
// a uretprobe's return.
func (u *Uprobes) hitInstructions() (swbp, ret int) {
	if u.hitPath == HitPathV612 {
		return swbpInstructionsV612, retInstructionsV612
	}
	return swbpInstructionsToday, retInstructionsToday
}

// utask mirrors struct uprobe_task, current->utask: one task's uprobe state.
// Only the task's own thread touches it.
type utask struct {
	// The single-step out of line in progress (state SSTEP).
	active *Uprobe
	vaddr  uint64 // the probed address
	xol    uint64 // the slot's address
	slot   int
	userTF bool // TF was set by the task itself

	area *xolArea       // the mm's XOL area, once the task used it
	ris  []*retInstance // return_instances, innermost last
	pool []*retInstance // ri_pool (v6.13+): freed instances for reuse
}

// retInstance mirrors struct return_instance: a pending return of a
// function whose entry a uretprobe hit.
type retInstance struct {
	// up is leased (v6.13+: uretSRCU read-locked with srcuIdx) or, on the
	// v6.12 hit path, referenced (try_get_uprobe()).
	up      *Uprobe
	srcuIdx int
	fn      uint64 // the probed address (the function entry)
	stack   uint64 // sp at the entry: where the return address is
	origRet uint64
	chained bool // the return address was already the trampoline (tail call)
}

// xolArea mirrors struct xol_area: the [uprobes] page of one mm.
type xolArea struct {
	vaddr uint64
	page  *pgtable.Page
	// used is the slot bitmap (xol_area->bitmap), bit i set while slot i is
	// taken; bit 0 is the trampoline. Lock-free, as in the kernel: a hit
	// takes and frees a slot with one atomic read-modify-write each. Every
	// CPU's hits write it, so it has cache lines of its own (128 bytes: x86
	// prefetches line pairs), away from vaddr and page, which every int3
	// reads: the kernel's bitmap is an allocation of its own (kcalloc in
	// __create_xol_area()).
	_    [128]byte
	used smp.Uint32
	_    [128]byte
	// mu is the wait queue's lock (xol_area->wq.lock): it protects freed
	// and the updates of waiters. Taken only when all slots are busy, or to
	// wake a waiter. A leaf lock.
	mu      sync.Mutex
	waiters smp.Int32     // tasks waiting for a slot (waitqueue_active: READ_ONCE)
	freed   chan struct{} // closed (and replaced) when a slot is freed with waiters
}

func getUtask(r *kernel.Runner) *utask {
	ut, _ := r.Utask.(*utask)
	if ut == nil {
		ut = &utask{}
		r.Utask = ut
	}
	return ut
}

// Int3 is the int3 trap of a task (kernel.Traps): uprobe_pre_sstep_notifier()
// then handle_swbp(). It returns 0 to resume or the signal to deliver.
func (u *Uprobes) Int3(r *kernel.Runner) kernel.Signal {
	m := r.Task.MM
	ut, _ := r.Utask.(*utask)
	if !m.FlagTest(mm.MMF_HAS_UPROBES) && (ut == nil || len(ut.ris) == 0) {
		return kernel.SIGTRAP // not ours
	}
	bp := r.Regs.RIP - 1 // uprobe_get_swbp_addr
	if ut != nil && ut.area != nil && bp == ut.area.vaddr+trampolineOff {
		return u.handleTrampoline(r, ut)
	}
	return u.handleSwbp(r, bp)
}

// handleSwbp mirrors handle_swbp(): the whole hit runs in one read section
// of the flavour.
func (u *Uprobes) handleSwbp(r *kernel.Runner, bp uint64) kernel.Signal {
	th := r.Task.Thread
	idx := u.flavor.ReadLock(th)
	defer func() { u.flavor.ReadUnlock(th, idx) }()
	swbp, _ := u.hitInstructions()
	sched.ChargeKernelInstructions(swbp)
	up, isSwbp := u.findActiveUprobe(r, bp)
	if up == nil {
		if isSwbp {
			return kernel.SIGTRAP // somebody else's int3
		}
		r.Regs.RIP = bp // raced with unregister: run the original again
		return 0
	}
	r.Regs.RIP = bp
	if !up.copied.Load() {
		return 0
	}
	ut := getUtask(r)
	u.handlerChain(up, r, ut)
	u.archUprobeOptimize(r, up, bp) // try to optimize after the first hit
	if r.Regs.RIP != bp {
		return 0 // a handler moved ip: skip the instruction
	}
	// arch_uprobe_skip_sstep(): x86 emulates the simple ones.
	if up.insn.Class == cpu.Emulate && r.Interp().Emulate(&up.insn, &r.Regs, r) == nil {
		return 0
	}
	u.preSsout(up, r, ut, bp)
	return 0
}

// findActiveUprobe mirrors find_active_uprobe_rcu(): first without the
// mmap lock (find_active_uprobe_speculative, v6.14+: valid only if no
// mmap write section ran meanwhile), then under the mmap read lock, where a
// miss also asks whether the byte is a trap (is_trap_at_addr) and
// recomputes MMF_HAS_UPROBES if asked to.
func (u *Uprobes) findActiveUprobe(r *kernel.Runner, bp uint64) (*Uprobe, bool) {
	m := r.Task.MM
	if u.hitPath == HitPathV612 {
		return u.findActiveUprobeMmapLock(r, bp) // no speculation before v6.14
	}
	// find_active_uprobe_speculative's guard(rcu)(): classic RCU.
	idx := rcu.ReadLock(r.Task.Thread)
	if seq := m.LockSeq().Raw(); seq&1 == 0 { // mmap_lock_speculate_try_begin
		start, _, v := m.Tree().Find(bp) // vma_lookup under RCU
		if v != nil && start <= bp && v.File != nil {
			up := u.findUprobeRCU(v.File.Inode, v.Pgoff<<pgtable.PageShift+bp-start)
			if up != nil && !m.LockSeq().ReadRetry(seq) {
				rcu.ReadUnlock(r.Task.Thread, idx)
				return up, false
			}
		}
	}
	rcu.ReadUnlock(r.Task.Thread, idx)
	return u.findActiveUprobeMmapLock(r, bp)
}

// findActiveUprobeMmapLock is find_active_uprobe_rcu() under the mmap read
// lock: the whole of it before v6.14, the fallback of the speculative
// lookup since.
func (u *Uprobes) findActiveUprobeMmapLock(r *kernel.Runner, bp uint64) (*Uprobe, bool) {
	m := r.Task.MM
	m.MmapReadLock(r)
	defer m.MmapReadUnlock()
	var up *Uprobe
	isSwbp := false
	if v := m.VMALookup(bp); v != nil {
		if v.File != nil {
			up = u.findUprobeRCU(v.File.Inode, vaddrToOffset(v, bp))
		}
		// is_trap_at_addr(): __get_user() with page faults disabled,
		// then get_user_pages(FOLL_FORCE), both local data reads that the
		// task's PKRU must allow (check_vma_flags()). On an execute-only
		// VMA both fail with EFAULT, and handle_swbp() then restarts the
		// instruction rather than send SIGTRAP, at every hit.
		if up == nil && m.VMAAccessPermitted(v, false, false, false, *r.PKRU()) {
			b, ok := m.PeekByte(bp)
			if !ok {
				b, _ = v.FileByte(bp)
			}
			isSwbp = b == swbp
		}
	}
	if up == nil && m.FlagTest(mm.MMF_RECALC_UPROBES) {
		m.FlagClear(mm.MMF_RECALC_UPROBES)
		u.recalc(m)
	}
	return up, isSwbp
}

// handlerChain mirrors handler_chain(): every consumer's handler once, then
// the return instance if a consumer with a ret_handler wants it, then, if
// every handler asked for it, the breakpoint's removal from this mm.
func (u *Uprobes) handlerChain(up *Uprobe, r *kernel.Runner, ut *utask) {
	cons := *up.consumers.Load()
	remove, wantRet := true, false
	for _, c := range cons {
		rc := 0
		if c.Handler != nil {
			rc = c.Handler(r)
		}
		remove = remove && rc == HandlerRemove
		if c.RetHandler != nil && rc != HandlerRemove && rc != HandlerIgnore {
			wantRet = true
		}
	}
	if wantRet {
		u.prepareUretprobe(up, r, ut)
	}
	if remove && len(cons) > 0 {
		up.registerRwsem.DownRead(r)
		if !up.filterChain(r.Task.MM) {
			u.unapply(r, up, r.Task.MM)
		}
		up.registerRwsem.UpRead()
	}
}

// getXolArea mirrors get_xol_area() and xol_add_vma(): the mm's [uprobes]
// page, mapped on first use at the highest free page below TASK_SIZE, with
// the uretprobe trampoline in slot 0. The model CPU has no syscall, so the
// trampoline is the compat one: a bare int3.
func (u *Uprobes) getXolArea(r *kernel.Runner, ut *utask) (*xolArea, error) {
	if ut.area != nil {
		return ut.area, nil
	}
	m := r.Task.MM
	if a, ok := u.xol.Load(m); ok {
		ut.area = a.(*xolArea)
		return ut.area, nil
	}
	if err := m.MmapWriteLockKillable(r); err != nil {
		return nil, err
	}
	defer m.MmapWriteUnlock()
	if a, ok := u.xol.Load(m); ok { // -EALREADY: another thread won
		ut.area = a.(*xolArea)
		return ut.area, nil
	}
	// xol_add_vma(): the hint is TASK_SIZE - PAGE_SIZE, above
	// DEFAULT_MAP_WINDOW with 5-level paging, which puts the area at the
	// top of the 56-bit space there.
	addr, err := m.GetUnmappedArea(m.TaskSize()-pgtable.PageSize, pgtable.PageSize)
	if err != nil {
		return nil, err
	}
	a := &xolArea{vaddr: addr, page: pgtable.NewAnonPage(), freed: make(chan struct{})}
	a.used.Init("xol_area.bitmap")
	a.waiters.Init("xol_area.wq")
	a.used.Store(1 << trampolineOff)
	a.page.Bytes()[trampolineOff] = swbp
	sm := &mm.SpecialMapping{Name: xolAreaName, Pages: []*pgtable.Page{a.page}, Mremap: refuseMremap}
	if _, err := m.InstallSpecialMapping(addr, pgtable.PageSize, xolAreaFlags, sm); err != nil {
		return nil, err
	}
	u.xol.Store(m, a)
	ut.area = a
	return a, nil
}

// refuseMremap is xol_mremap() and x86's tramp_mremap(): the kernel's pages
// must stay where it put them.
func refuseMremap() error { return errno.EPERM }

// XolArea returns the address of m's [uprobes] page, if it has one.
func (u *Uprobes) XolArea(m *mm.MM) (uint64, bool) {
	a, ok := u.xol.Load(m)
	if !ok {
		return 0, false
	}
	return a.(*xolArea).vaddr, true
}

// getSlot mirrors xol_get_insn_slot()'s wait: take a free slot, sleeping
// (uninterruptibly) while all are busy.
func (a *xolArea) getSlot(w locking.Waiter) int {
	for {
		if i, ok := a.trySlot(); ok {
			return i
		}
		// prepare_to_wait(): queue, then look again, so that a free that
		// did not see us waiting is seen here (both are seq-cst atomics).
		a.mu.Lock()
		a.waiters.Add(1)
		ch := a.freed
		a.mu.Unlock()
		i, ok := a.trySlot()
		if !ok {
			wait := func() { sched.Wait(a, "xol slot", ch, nil) }
			if b, isB := w.(locking.Blocker); isB {
				b.Block(wait)
			} else {
				wait()
			}
		}
		a.mu.Lock()
		a.waiters.Add(-1)
		a.mu.Unlock()
		if ok {
			return i
		}
	}
}

// trySlot takes the first free slot, if there is one. Mirrors
// xol_get_slot_nr(): find_first_zero_bit(), then test_and_set_bit(); a
// lost race just looks again.
func (a *xolArea) trySlot() (int, bool) {
	for {
		free := ^a.used.Load() & (1<<xolSlots - 1)
		if free == 0 {
			return 0, false
		}
		bit := free & -free
		if a.used.Or(bit)&bit == 0 {
			return bits.TrailingZeros32(bit), true
		}
	}
}

// freeSlot mirrors xol_free_insn_slot(): clear_bit(), then wake the waiters
// if there are any (waitqueue_active()).
func (a *xolArea) freeSlot(i int) {
	a.used.And(^uint32(1 << i))
	if a.waiters.Load() > 0 {
		a.mu.Lock()
		sched.Close(a.freed)
		a.freed = make(chan struct{})
		a.mu.Unlock()
	}
}

// preSsout mirrors pre_ssout(), xol_get_insn_slot() and x86's
// arch_uprobe_pre_xol(): copy the instruction into a slot, point ip at it
// and set TF; SingleStep finishes. On failure the task restarts at the
// probe (and hits it again).
func (u *Uprobes) preSsout(up *Uprobe, r *kernel.Runner, ut *utask, bp uint64) {
	if !up.tryGet() {
		return
	}
	a, err := u.getXolArea(r, ut)
	if err != nil {
		up.put()
		return
	}
	slot := a.getSlot(r)
	b := a.page.Bytes()[slot*xolSlotBytes : (slot+1)*xolSlotBytes]
	n := copy(b, up.orig[:up.insn.Len])
	if up.insn.Op == cpu.OpCall {
		clear(b[1:n]) // branch_clear_offset(): "call 1f", only to trap
	}
	ut.active, ut.vaddr, ut.slot = up, bp, slot
	ut.xol = a.vaddr + uint64(slot*xolSlotBytes)
	ut.userTF = r.Regs.Flags&cpu.FlagTF != 0
	r.Regs.RIP = ut.xol
	r.Regs.Flags |= cpu.FlagTF
}

// SingleStep is the #DB after the out-of-line step (kernel.Traps):
// uprobe_post_sstep_notifier() and handle_singlestep() with x86's
// arch_uprobe_post_xol(): fix ip up (relative to the original address),
// clear TF unless the task had set it, free the slot.
func (u *Uprobes) SingleStep(r *kernel.Runner) kernel.Signal {
	ut, _ := r.Utask.(*utask)
	if ut == nil || ut.active == nil {
		return kernel.SIGTRAP // the task's own TF
	}
	up := ut.active
	_ = up.insn.PostXOL(&r.Regs, ut.vaddr, ut.xol) // ErrRestart: regs reset to the call
	u.endXol(r, ut)
	if ut.userTF {
		return kernel.SIGTRAP
	}
	return 0
}

// endXol ends the single-step: TF as the task had it, slot freed, uprobe
// reference dropped.
func (u *Uprobes) endXol(r *kernel.Runner, ut *utask) {
	if !ut.userTF {
		r.Regs.Flags &^= cpu.FlagTF
	}
	ut.area.freeSlot(ut.slot)
	up := ut.active
	ut.active = nil
	up.put()
}

// Fault is a fault of the task (kernel.Traps): a fault of the instruction
// stepped out of line aborts the step, so the signal is delivered at the
// probed address (arch_uprobe_abort_xol()).
func (u *Uprobes) Fault(r *kernel.Runner) {
	ut, _ := r.Utask.(*utask)
	if ut == nil || ut.active == nil {
		return
	}
	r.Regs.RIP = ut.vaddr
	u.endXol(r, ut)
}

// TaskExit frees the task's uprobe state (uprobe_free_utask()): pending return
// instances give their leases back, a step in progress its slot.
func (u *Uprobes) TaskExit(r *kernel.Runner) {
	ut, _ := r.Utask.(*utask)
	if ut == nil {
		return
	}
	if ut.active != nil {
		u.endXol(r, ut)
	}
	for len(ut.ris) > 0 {
		u.popRI(r, ut)
	}
	r.Utask = nil
}

// prepareUretprobe mirrors prepare_uretprobe() and x86's
// arch_uretprobe_hijack_return_addr(): swap the return address at sp for
// the trampoline and push a return instance that keeps the original. A
// return address that already is the trampoline (a tail call through
// another probed function) makes a chained instance, which returns where
// the one below it returns.
func (u *Uprobes) prepareUretprobe(up *Uprobe, r *kernel.Runner, ut *utask) {
	a, err := u.getXolArea(r, ut)
	if err != nil || len(ut.ris) >= maxURetDepth {
		return
	}
	ri := u.allocRetInstance(up, ut)
	if ri == nil {
		return
	}
	tramp := a.vaddr + trampolineOff
	sp := r.Regs.R[cpu.RSP]
	c := r.Interp()
	orig, err := c.Load64(r, sp)
	if err != nil || c.Store64(r, sp, tramp) != nil {
		u.freeRetInstance(r, ut, ri)
		return
	}
	chained := orig == tramp
	u.cleanupReturnInstances(r, ut, chained, sp)
	if chained {
		if len(ut.ris) == 0 {
			u.freeRetInstance(r, ut, ri)
			return // not possible but from an attack
		}
		orig = ut.ris[len(ut.ris)-1].origRet
	}
	ri.up, ri.fn, ri.stack, ri.origRet, ri.chained = up, r.Regs.RIP, sp, orig, chained
	if u.hitPath != HitPathV612 {
		ri.srcuIdx = u.uretSRCU.ReadLock(r.Task.Thread) // the lease survives the return to user
	}
	ut.ris = append(ut.ris, ri)
}

// isAlive mirrors x86's arch_uretprobe_is_alive(): an instance is alive
// while its return address is still on the stack (for a call: strictly
// above sp, which the call just decremented).
func isAlive(ri *retInstance, call bool, sp uint64) bool {
	if call {
		return sp < ri.stack
	}
	return sp <= ri.stack
}

// cleanupReturnInstances mirrors cleanup_return_instances(): drop the
// instances a longjmp skipped.
func (u *Uprobes) cleanupReturnInstances(r *kernel.Runner, ut *utask, chained bool, sp uint64) {
	for len(ut.ris) > 0 && !isAlive(ut.ris[len(ut.ris)-1], !chained, sp) {
		u.popRI(r, ut)
	}
}

// popRI pops the innermost return instance and frees it.
func (u *Uprobes) popRI(r *kernel.Runner, ut *utask) {
	ri := ut.ris[len(ut.ris)-1]
	ut.ris[len(ut.ris)-1] = nil
	ut.ris = ut.ris[:len(ut.ris)-1]
	u.freeRetInstance(r, ut, ri)
}

// handleTrampoline mirrors uprobe_handle_trampoline(): a return through the
// trampoline. Pop the instances of the innermost chain, set ip to their
// original return address, and run each one's ret_handlers (unless a
// longjmp made the chain stale). SIGILL if nothing is pending.
func (u *Uprobes) handleTrampoline(r *kernel.Runner, ut *utask) kernel.Signal {
	if len(ut.ris) == 0 {
		return sigill
	}
	_, ret := u.hitInstructions()
	sched.ChargeKernelInstructions(ret)
	sp := r.Regs.R[cpu.RSP]
	for {
		// find_next_ret_chain: the chain is the top instance and the
		// chained ones under it.
		j := len(ut.ris) - 1
		for ut.ris[j].chained {
			j--
		}
		valid := j == 0 || isAlive(ut.ris[j-1], false, sp)
		r.Regs.RIP = ut.ris[len(ut.ris)-1].origRet
		for len(ut.ris) > j {
			if valid {
				u.handleUretprobeChain(ut.ris[len(ut.ris)-1], r)
			}
			u.popRI(r, ut)
		}
		if valid || len(ut.ris) == 0 {
			return 0
		}
	}
}

// handleUretprobeChain mirrors handle_uretprobe_chain(): every consumer's
// ret_handler, in a read section of the flavour.
func (u *Uprobes) handleUretprobeChain(ri *retInstance, r *kernel.Runner) {
	th := r.Task.Thread
	idx := u.flavor.ReadLock(th)
	for _, c := range *ri.up.consumers.Load() {
		if c.RetHandler != nil {
			c.RetHandler(ri.fn, r)
		}
	}
	u.flavor.ReadUnlock(th, idx)
}
