package uprobes

import (
	"bytes"
	"encoding/binary"
	"math"

	"mmlab/cpu"
	"mmlab/errno"
	"mmlab/kernel"
	"mmlab/locking"
	"mmlab/mm"
	"mmlab/mm/pgtable"
	"mmlab/rcu"
	"mmlab/sched"
)

// x86-64 optimized uprobes (v6.18+, arch/x86/kernel/uprobes.c): a uprobe on
// a 5-byte nop is installed as an int3 like any other; its first hit, after
// the handlers, rewrites it into "call rel32" to a trampoline page of the
// mm, [uprobes-trampoline], which enters the kernel with the uprobe syscall
// instead of a trap.

const (
	callInsn     = 0xe8 // CALL_INSN_OPCODE
	callInsnSize = 5    // CALL_INSN_SIZE
	trampName    = "[uprobes-trampoline]"
	trampFlags   = mm.VM_READ | mm.VM_EXEC | mm.VM_MAYEXEC | mm.VM_MAYREAD | mm.VM_DONTCOPY | mm.VM_IO
	enxio        = errno.Errno(6) // ENXIO
)

// newTrampMapping returns tramp_mapping: the special mapping of every
// trampoline VMA, one page holding uprobe_trampoline_entry (the kernel's
// is a page of its rodata, shared by every mm).
func newTrampMapping() *mm.SpecialMapping {
	p := pgtable.NewAnonPage()
	copy(p.Bytes(), cpu.UprobeTrampoline())
	return &mm.SpecialMapping{Name: trampName, Pages: []*pgtable.Page{p}, Mremap: refuseMremap}
}

// trampolines is mm->uprobes_state.head_tramps: the addresses of the mm's
// trampolines, newest first. Protected by the mm's mmap write lock.
type trampolines struct{ vaddrs []uint64 }

// trampsOf returns m's list (arch_uprobe_init_state makes it empty).
func (u *Uprobes) trampsOf(m *mm.MM) *trampolines {
	t, _ := u.tramps.LoadOrStore(m, &trampolines{})
	return t.(*trampolines)
}

// Trampolines returns the addresses of m's trampolines on its list, newest
// first (for tests and tools; the mm's mmap lock keeps it stable).
func (u *Uprobes) Trampolines(m *mm.MM) []uint64 {
	t, ok := u.tramps.Load(m)
	if !ok {
		return nil
	}
	return append([]uint64(nil), t.(*trampolines).vaddrs...)
}

// isReachableByCall mirrors is_reachable_by_call().
func isReachableByCall(vtramp, vaddr uint64) bool {
	delta := int64(vaddr + callInsnSize - vtramp)
	return delta >= math.MinInt32 && delta <= math.MaxInt32
}

// findNearestTrampoline mirrors find_nearest_trampoline(): the free page
// nearest to the end of the call at vaddr, searched bottom-up over
// [call_end, min(call_end+INT_MAX, TASK_SIZE)) and top-down over
// [max(call_end+INT_MIN, PAGE_SIZE), call_end); the lower one only if it is
// strictly closer.
func findNearestTrampoline(m *mm.MM, vaddr uint64) (uint64, error) {
	callEnd := vaddr + callInsnSize
	lowLimit := uint64(pgtable.PageSize) // check_add_overflow(call_end, INT_MIN)
	if callEnd >= -math.MinInt32 {
		lowLimit = callEnd - -math.MinInt32
	}
	high, errHigh := m.UnmappedArea(callEnd, min(callEnd+math.MaxInt32, mm.TaskSize), pgtable.PageSize, false)
	low, errLow := m.UnmappedArea(max(lowLimit, pgtable.PageSize), callEnd, pgtable.PageSize, true)
	switch {
	case errHigh != nil && errLow != nil:
		return 0, errno.ENOMEM
	case errHigh != nil:
		return low, nil
	case errLow != nil:
		return high, nil
	}
	if callEnd-low < high-callEnd {
		return low, nil
	}
	return high, nil
}

// getTrampolineLocked mirrors get_uprobe_trampoline() and
// create_uprobe_trampoline(): the first trampoline on m's list a call at
// vaddr reaches, else a new one at the nearest free page, added to the
// list's head. Caller holds m's mmap write lock.
func (u *Uprobes) getTrampolineLocked(m *mm.MM, vaddr uint64) (tramp uint64, isNew bool, err error) {
	if vaddr > mm.TaskSize || vaddr < pgtable.PageSize {
		return 0, false, errno.EINVAL
	}
	ts := u.trampsOf(m)
	for _, t := range ts.vaddrs {
		if isReachableByCall(t, vaddr) {
			return t, false, nil
		}
	}
	at, err := findNearestTrampoline(m, vaddr)
	if err != nil {
		return 0, false, err
	}
	if _, err := m.InstallSpecialMapping(at, pgtable.PageSize, trampFlags, u.trampMapping); err != nil {
		return 0, false, err
	}
	ts.vaddrs = append([]uint64{at}, ts.vaddrs...)
	return at, true, nil
}

// destroyTrampolineLocked mirrors destroy_uprobe_trampoline(): the
// trampoline leaves m's list, its page stays mapped (a thread may be
// executing in it).
func (u *Uprobes) destroyTrampolineLocked(m *mm.MM, tramp uint64) {
	ts := u.trampsOf(m)
	for i, t := range ts.vaddrs {
		if t == tramp {
			ts.vaddrs = append(ts.vaddrs[:i:i], ts.vaddrs[i+1:]...)
			return
		}
	}
}

// inTrampolineLocked mirrors __in_uprobe_trampoline(): ip lies in a VMA of
// tramp_mapping in m. Caller holds m's mmap lock or is in an RCU read
// section.
func (u *Uprobes) inTrampolineLocked(m *mm.MM, ip uint64) bool {
	if m == nil {
		return false
	}
	v := m.VMALookup(ip)
	return v != nil && v.IsSpecialMapping(u.trampMapping)
}

// inUprobeTrampoline mirrors in_uprobe_trampoline(): the lookup without
// the mmap lock (mmap_lock speculation in a classic RCU read section),
// under the mmap read lock if a writer ran meanwhile.
func (u *Uprobes) inUprobeTrampoline(r *kernel.Runner, ip uint64) bool {
	m := r.Task.MM
	found, retry := false, true
	idx := rcu.ReadLock(r.Task.Thread)
	if seq := m.LockSeq().Raw(); seq&1 == 0 { // mmap_lock_speculate_try_begin
		found = u.inTrampolineLocked(m, ip)
		retry = m.LockSeq().ReadRetry(seq)
	}
	rcu.ReadUnlock(r.Task.Thread, idx)
	if retry {
		m.MmapReadLock(r)
		found = u.inTrampolineLocked(m, ip)
		m.MmapReadUnlock()
	}
	return found
}

// fatal is fatal_signal_pending() for the task w stands for.
func fatal(w locking.Waiter) bool {
	if w == nil {
		return false
	}
	select {
	case <-w.Fatal():
		return true
	default:
		return false
	}
}

// copyFromVaddr mirrors x86's copy_from_vaddr(): the bytes at vaddr of m
// through GUP with FOLL_FORCE, which fails with EINTR for a caller with a
// fatal signal; a page not present reads as the file's page it would
// fault in. Caller holds m's mmap lock; dst does not cross a page.
func copyFromVaddr(w locking.Waiter, m *mm.MM, vaddr uint64, dst []byte) error {
	if fatal(w) {
		return errno.EINTR
	}
	v := m.VMALookup(vaddr)
	if v == nil {
		return errno.EFAULT
	}
	for i := range dst {
		b, ok := m.PeekByte(vaddr + uint64(i))
		if !ok {
			if b, ok = v.FileByte(vaddr + uint64(i)); !ok {
				return errno.EFAULT
			}
		}
		dst[i] = b
	}
	return nil
}

// isOptimized mirrors is_optimized() and __is_optimized(): the site is a
// call into a trampoline of m. (v6.19's __in_uprobe_trampoline() looks in
// current->mm, which for a removal by another process is the wrong mm; the
// live 6.18.44 kernel restores an optimized site detached by another
// process, live/uprobe's TestLiveRemoteUnregisterRestores, so the model
// looks in m, as the live kernel does.)
func (u *Uprobes) isOptimized(w locking.Waiter, m *mm.MM, vaddr uint64) (bool, error) {
	var insn [callInsnSize]byte
	if err := copyFromVaddr(w, m, vaddr, insn[:]); err != nil {
		return false, err
	}
	if insn[0] != callInsn {
		return false, nil
	}
	rel := int32(binary.LittleEndian.Uint32(insn[1:]))
	return u.inTrampolineLocked(m, vaddr+callInsnSize+uint64(int64(rel))), nil
}

// shouldOptimize mirrors should_optimize().
func (up *Uprobe) shouldOptimize() bool { return up.canOptimize && !up.optimizeFail.Load() }

// callTo returns "call tramp" at vaddr (__text_gen_insn).
func callTo(vaddr, tramp uint64) [callInsnSize]byte {
	insn := [callInsnSize]byte{callInsn}
	binary.LittleEndian.PutUint32(insn[1:], uint32(tramp-(vaddr+callInsnSize)))
	return insn
}

// The three writes of int3_update(), numbered for its step points.
const (
	writeInt3 = 1 // int3 over the call's opcode (removal only)
	writeTail = 2 // bytes 1-4
	writeHead = 3 // byte 0
)

// writeNames name the writes at their preemption point (a deterministic
// run may switch tasks before each: the kernel's text-poke sync IPIs wait
// between them).
var writeNames = [...]string{writeInt3: "write int3", writeTail: "write tail", writeHead: "write head"}

// int3Update mirrors int3_update(): rewrite the 5 bytes at vaddr into insn
// with int3 guarding them, from write first on (writeInt3 for a removal,
// writeTail for an optimization, which finds the int3 installed, or for
// the after design's finishing of a removal stopped half-way). Each write
// is checked (verify_insn: the site starts with a call before the first,
// with an int3 before the others: EPERM otherwise) and followed by
// smp_text_poke_sync_each_cpu(), which also precedes the tail write. The
// last write is a removal (it may zap the page back to the file's) unless
// optimizing.
func (u *Uprobes) int3Update(w locking.Waiter, m *mm.MM, v *mm.VMA, vaddr uint64, insn [callInsnSize]byte, optimize bool, first int) error {
	if first <= writeInt3 {
		if err := u.checkedWrite(w, m, v, vaddr, writeInt3, []byte{swbp}, true, callInsn); err != nil {
			return err
		}
	}
	u.machine.TextPokeSync(w)
	// The tail write is given byte 0 too, the int3 it has just verified,
	// so that the verify callback sees the site's first byte (the kernel's
	// reads the page at ctx->base): the bytes written are the same.
	if err := u.checkedWrite(w, m, v, vaddr, writeTail, append([]byte{swbp}, insn[1:]...), true, swbp); err != nil {
		return err
	}
	u.machine.TextPokeSync(w)
	if err := u.checkedWrite(w, m, v, vaddr, writeHead, insn[:1], optimize, swbp); err != nil {
		return err
	}
	u.machine.TextPokeSync(w)
	return nil
}

// checkedWrite is one uprobe_write() of int3_update() with verify_insn():
// EPERM unless the site's first byte is expect.
func (u *Uprobes) checkedWrite(w locking.Waiter, m *mm.MM, v *mm.VMA, vaddr uint64, n int, data []byte, register bool, expect byte) error {
	if hooks.textWrite != nil {
		hooks.textWrite(m, vaddr, n)
	}
	sched.At("int3_update", writeNames[n])
	ok := true
	verify := func(cur []byte) bool {
		ok = cur[0] == expect
		return ok
	}
	err := m.UprobeWrite(w, v, vaddr, data, register, verify, func() { u.machine.FlushTLB(m, w) })
	if err == nil && !ok {
		return errno.EPERM
	}
	return err
}

// archUprobeOptimize mirrors arch_uprobe_optimize() and
// __arch_uprobe_optimize(), run on a hit after the handlers: under the mmap
// write lock (not killable, inside the hit path's read section), if the
// site still starts with an int3, point a call at a trampoline. A failure
// marks the uprobe never to be optimized again and drops a trampoline
// created for it from the list (it stays mapped). Before, the failure
// warns (WARN_ON_ONCE); after (seed 000 patch 4), a probed task that was
// killed meanwhile fails legitimately and does not.
func (u *Uprobes) archUprobeOptimize(r *kernel.Runner, up *Uprobe, vaddr uint64) {
	if !up.shouldOptimize() {
		return
	}
	m := r.Task.MM
	m.MmapWriteLock(r)
	defer m.MmapWriteUnlock()
	var insn [callInsnSize]byte
	if copyFromVaddr(r, m, vaddr, insn[:]) != nil || insn[0] != swbp {
		return // another thread optimized it, or it is gone
	}
	v := m.FindVMA(vaddr)
	if v == nil {
		up.optimizeFail.Store(true)
		return
	}
	tramp, isNew, err := u.getTrampolineLocked(m, vaddr)
	if err != nil {
		up.optimizeFail.Store(true)
		return
	}
	if err := u.int3Update(r, m, v, vaddr, callTo(vaddr, tramp), true, writeTail); err != nil {
		if u.design == DesignBefore || hooks.undoNoWarn {
			u.warnOnce(warnOptimize)
		}
		if isNew {
			u.destroyTrampolineLocked(m, tramp)
		}
		up.optimizeFail.Store(true)
	}
}

// setSwbp mirrors x86's set_swbp(): a site another thread already
// optimized is left alone; otherwise the int3 is written.
func (u *Uprobes) setSwbp(w locking.Waiter, up *Uprobe, m *mm.MM, v *mm.VMA, vaddr uint64) error {
	if up.shouldOptimize() {
		opt, err := u.isOptimized(w, m, vaddr)
		if err != nil {
			return err
		}
		if opt {
			return nil
		}
	}
	return u.write(w, m, v, vaddr, []byte{swbp}, true)
}

// setOrigInsn mirrors x86's set_orig_insn(): an optimized site is restored
// in the three writes of swbp_unoptimize(); any other has its first byte
// restored over the int3. Before, a failed restore of an optimized site
// warns (WARN_ON_ONCE), and a site a failed restore left half-way (int3,
// then the call's displacement or the original tail) no longer looks
// optimized, so only its first byte is restored. After (seed 000 patches 3
// and 4), such a site is finished from its tail write, and nothing warns.
func (u *Uprobes) setOrigInsn(w locking.Waiter, up *Uprobe, m *mm.MM, v *mm.VMA, vaddr uint64) error {
	if up.canOptimize {
		orig := [callInsnSize]byte(up.orig[:callInsnSize])
		opt, err := u.isOptimized(w, m, vaddr)
		if err != nil {
			return err
		}
		if opt {
			err := u.int3Update(w, m, v, vaddr, orig, false, writeInt3)
			if err != nil && (u.design == DesignBefore || hooks.undoNoWarn) {
				u.warnOnce(warnSetOrigInsn)
			}
			return err
		}
		if u.design == DesignAfter && !hooks.undoFinish {
			var cur [callInsnSize]byte
			if err := copyFromVaddr(w, m, vaddr, cur[:]); err != nil {
				return err
			}
			if cur[0] == swbp && !bytes.Equal(cur[1:], orig[1:]) {
				return u.int3Update(w, m, v, vaddr, orig, false, writeTail)
			}
		}
	}
	return u.write(w, m, v, vaddr, up.orig[:1], false)
}

// Syscall serves the uprobe syscall (kernel.Traps); any other is not
// uprobes'.
func (u *Uprobes) Syscall(r *kernel.Runner) (bool, kernel.Signal) {
	if r.Regs.R[cpu.RAX] != cpu.NrUprobe {
		return false, 0
	}
	return true, u.sysUprobe(r)
}

// uprobeSyscallArgs is struct uprobe_syscall_args: what the call and the
// trampoline pushed, from the stack pointer up.
const (
	argAX = iota
	argR11
	argCX
	argRetaddr
	nArgs
)

// sysUprobe mirrors SYSCALL_DEFINE0(uprobe): only a syscall from a
// trampoline is served (-ENXIO otherwise). The registers are rebuilt as
// they were at the probe (ip at the nop5, sp above what the call and the
// trampoline pushed) for the handlers (handle_syscall_uprobe), then the
// saved words are updated with what the handlers left, so that the
// trampoline's pops and ret resume after the nop5, or at the ip a handler
// set. A handler that moved sp gets an iret-like return straight there. A
// stack that cannot be read or written is SIGILL. (The shadow stack is not
// modelled.)
func (u *Uprobes) sysUprobe(r *kernel.Runner) kernel.Signal {
	regs := &r.Regs
	if !u.inUprobeTrampoline(r, regs.RIP) {
		regs.R[cpu.RAX] = ^uint64(enxio) + 1 // -ENXIO
		return 0
	}
	c := r.Interp()
	var args [nArgs]uint64
	for i := range args {
		v, err := c.Load64(r, regs.R[cpu.RSP]+uint64(8*i))
		if err != nil {
			return sigill
		}
		args[i] = v
	}
	ip := regs.RIP
	regs.R[cpu.RAX], regs.R[cpu.R11], regs.R[cpu.RCX] = args[argAX], args[argR11], args[argCX]
	regs.RIP = args[argRetaddr] - callInsnSize
	regs.R[cpu.RSP] += 8 * nArgs
	sp := regs.R[cpu.RSP]
	u.handleSyscallUprobe(r, regs.RIP)
	if regs.R[cpu.RSP] != sp {
		if args[argRetaddr]-callInsnSize == regs.RIP {
			regs.RIP += callInsnSize
		}
		return 0
	}
	regs.R[cpu.RSP] -= 8 * nArgs
	args[argAX], args[argR11], args[argCX] = regs.R[cpu.RAX], regs.R[cpu.R11], regs.R[cpu.RCX]
	if args[argRetaddr]-callInsnSize != regs.RIP {
		args[argRetaddr] = regs.RIP
	}
	regs.RIP = ip
	for i, a := range args {
		if c.Store64(r, regs.R[cpu.RSP]+uint64(8*i), a) != nil {
			return sigill
		}
	}
	regs.R[cpu.R11], regs.R[cpu.RCX] = regs.Flags, regs.RIP // sysret
	regs.R[cpu.RAX] = 0
	return 0
}

// handleSyscallUprobe mirrors handle_syscall_uprobe(): handle_swbp's
// lookup and handlers in one read section of the flavour, without the
// instruction (the trampoline's return skips it) and without optimizing.
func (u *Uprobes) handleSyscallUprobe(r *kernel.Runner, bp uint64) {
	th := r.Task.Thread
	idx := u.flavor.ReadLock(th)
	defer func() { u.flavor.ReadUnlock(th, idx) }()
	up, _ := u.findActiveUprobe(r, bp)
	if up == nil {
		return
	}
	u.handlerChain(up, r, getUtask(r))
}

// The WARN_ON_ONCE()s of the before design.
const (
	warnSetOrigInsn = iota // set_orig_insn(): swbp_unoptimize() failed
	warnOptimize           // __arch_uprobe_optimize(): swbp_optimize() failed
	nWarn
)

// warnOnce is WARN_ON_ONCE(true) at site: the first one counts (it taints
// the kernel and increments /sys/kernel/warn_count), later ones are silent.
func (u *Uprobes) warnOnce(site int) {
	if u.warned[site].CompareAndSwap(false, true) {
		u.warnings.Add(1)
	}
}

// Warnings returns the number of warnings issued, as warn_count counts
// them: at most one per WARN_ON_ONCE site.
func (u *Uprobes) Warnings() int64 { return u.warnings.Load() }
