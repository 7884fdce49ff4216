package uprobes

import (
	"bytes"
	"encoding/binary"
	"math"
	"sync"
	"sync/atomic"

	"mmlab/cpu"
	"mmlab/design"
	"mmlab/errno"
	"mmlab/kernel"
	"mmlab/locking"
	"mmlab/mm"
	"mmlab/mm/pgtable"
	"mmlab/rcu"
	"mmlab/sched"
	"mmlab/uapi"
)

// x86-64 optimized uprobes (v6.18+, arch/x86/kernel/uprobes.c): a uprobe on
// a 5-byte nop is installed as an int3 like any other; its first hit, after
// the handlers, rewrites it into "call rel32" to a trampoline page of the
// mm, [uprobes-trampoline], which enters the kernel with the uprobe syscall
// instead of a trap.
//
// The jmp-slot design (proposed on linux-trace-kernel in May 2026, "The x86
// uprobe nop5 optimization currently replaces a 5-byte NOP at the probe
// site with a CALL..."): the call pushes its return address at -8(%rsp),
// and the trampoline's pushes go below it, inside the 128-byte red zone a
// leaf function may keep data in. Instead the site gets "jmp rel32" to a
// 16-byte slot of its own in a trampoline page whose 256 slots are all
// cpu.UprobeSlot() (lea -128(%rsp),%rsp first), generated once and mapped
// read-execute into each mm that needs one; a per-mm slot table gives the
// site of each slot; the uprobe syscall finds the slot from the ip after
// its syscall, restores the site's registers, runs the consumers and
// returns through IRET straight to the site + 5 (or where a consumer set
// ip), never to the slot. Unoptimizing expects a jmp (0xE9) where the call
// design expects 0xE8. Where the proposal is silent the model chooses, and
// says so below: the page keeps the call design's name and VMA flags (so a
// forked child has the jmp but no page, as it has the call today), and a
// slot stays its site's for the life of the mm.

// Optimize is the x86-64 nop5 optimization, chosen at construction
// (Config.Optimize). The zero Optimize is unset: New refuses it
// (design.ErrUnset).
type Optimize int

const (
	// OptimizeOff leaves uprobes on 5-byte nops as int3s, as before v6.18
	// (every hit traps).
	OptimizeOff Optimize = iota + 1
	// OptimizeCall is v6.18+: the site becomes a call to the trampoline,
	// as on x86-64 since v6.18.
	OptimizeCall
	// OptimizeJmpSlot is the proposed fix: the site becomes a jmp to a
	// slot of its own, and the red zone is left alone.
	OptimizeJmpSlot
)

// Optimizations are the three, in table order, named "off", "call" and
// "jmp-slot".
var Optimizations = design.NewSet[Optimize]("optimization", "off", "call", "jmp-slot")

// String returns "off", "call" or "jmp-slot".
func (o Optimize) String() string { return Optimizations.String(o) }

// MarshalText returns the optimization's name.
func (o Optimize) MarshalText() ([]byte, error) { return Optimizations.Marshal(o) }

// UnmarshalText sets o to the optimization named text.
func (o *Optimize) UnmarshalText(text []byte) error { return Optimizations.Unmarshal(o, text) }

const (
	callInsn     = 0xe8 // CALL_INSN_OPCODE
	jmpInsn      = 0xe9 // JMP32_INSN_OPCODE
	callInsnSize = 5    // CALL_INSN_SIZE, also the jmp's
	trampName    = "[uprobes-trampoline]"
	trampFlags   = mm.VM_READ | mm.VM_EXEC | mm.VM_MAYEXEC | mm.VM_MAYREAD | mm.VM_DONTCOPY | mm.VM_IO
	enxio        = errno.Errno(6) // ENXIO
	// slotsPerPage is the number of slots of a jmp-slot trampoline page.
	slotsPerPage = pgtable.PageSize / cpu.UprobeSlotBytes
)

// newTrampMapping returns tramp_mapping: the special mapping of every
// trampoline VMA, one page holding uprobe_trampoline_entry (the kernel's
// is a page of its rodata, shared by every mm), or, for the jmp-slot
// design, the page of slots.
func newTrampMapping(o Optimize) *mm.SpecialMapping {
	p := pgtable.NewAnonPage()
	if o == OptimizeJmpSlot {
		slot := cpu.UprobeSlot()
		for i := range slotsPerPage {
			copy(p.Bytes()[i*cpu.UprobeSlotBytes:], slot)
		}
	} else {
		copy(p.Bytes(), cpu.UprobeTrampoline())
	}
	return &mm.SpecialMapping{Name: trampName, Pages: []*pgtable.Page{p}, Mremap: refuseMremap}
}

// opcode is the first byte of an optimized site: the call's or the jmp's.
func (u *Uprobes) opcode() byte {
	if u.opt == OptimizeJmpSlot {
		return jmpInsn
	}
	return callInsn
}

// trampolines is mm->uprobes_state.head_tramps: the addresses of the mm's
// trampolines, newest first, and for the jmp-slot design the mm's slot
// table. vaddrs and sites are protected by the mm's mmap write lock.
type trampolines struct {
	vaddrs []uint64
	// sites maps an optimized site to its slot's address (jmp-slot).
	sites map[uint64]uint64
	// slots maps a trampoline page's address to its *slotTable
	// (jmp-slot): written under the mmap write lock, read by the uprobe
	// syscall without it.
	slots sync.Map
}

// slotTable is one page's part of the per-mm slot table: slot i's site, 0
// while the slot is free. Stored under the mmap write lock, loaded by the
// uprobe syscall.
type slotTable [slotsPerPage]atomic.Uint64

// trampsOf returns m's list (arch_uprobe_init_state makes it empty).
func (u *Uprobes) trampsOf(m *mm.MM) *trampolines {
	t, _ := u.tramps.LoadOrStore(m, &trampolines{sites: map[uint64]uint64{}})
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
	high, errHigh := m.UnmappedArea(callEnd, min(callEnd+math.MaxInt32, m.TaskSize()), pgtable.PageSize, false)
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

// getTrampolineLocked mirrors get_uprobe_trampoline(): the first
// trampoline on m's list a call at vaddr reaches, else a new one. Caller
// holds m's mmap write lock.
func (u *Uprobes) getTrampolineLocked(m *mm.MM, vaddr uint64) (tramp uint64, isNew bool, err error) {
	if vaddr > m.TaskSize() || vaddr < pgtable.PageSize {
		return 0, false, errno.EINVAL
	}
	for _, t := range u.trampsOf(m).vaddrs {
		if isReachableByCall(t, vaddr) {
			return t, false, nil
		}
	}
	at, err := u.newTrampolineLocked(m, vaddr)
	return at, err == nil, err
}

// newTrampolineLocked mirrors create_uprobe_trampoline(): a trampoline at
// the free page nearest to the site at vaddr, added to the head of m's
// list. Caller holds m's mmap write lock.
func (u *Uprobes) newTrampolineLocked(m *mm.MM, vaddr uint64) (uint64, error) {
	at, err := findNearestTrampoline(m, vaddr)
	if err != nil {
		return 0, err
	}
	if _, err := m.InstallSpecialMapping(at, pgtable.PageSize, trampFlags, u.trampMapping); err != nil {
		return 0, err
	}
	ts := u.trampsOf(m)
	ts.vaddrs = append([]uint64{at}, ts.vaddrs...)
	return at, nil
}

// getSlotLocked is the jmp-slot design's per-mm slot assignment: the slot
// of the site at vaddr, if it has one (a model choice: a slot stays its
// site's for the life of the mm, so a thread between the jmp and the
// syscall always finds its site, even after a removal and a new
// optimization); else the first free slot a jmp at vaddr reaches on m's
// trampoline pages, newest first; else slot 0 of a new page at the nearest
// free page, as the call design places its trampolines. Caller holds m's
// mmap write lock; releaseSlotLocked undoes a new assignment.
func (u *Uprobes) getSlotLocked(m *mm.MM, vaddr uint64) (slot uint64, newSlot, newPage bool, err error) {
	if vaddr > m.TaskSize() || vaddr < pgtable.PageSize {
		return 0, false, false, errno.EINVAL
	}
	ts := u.trampsOf(m)
	if a, ok := ts.sites[vaddr]; ok {
		return a, false, false, nil
	}
	assign := func(page uint64, i int) uint64 {
		t, _ := ts.slots.LoadOrStore(page, new(slotTable))
		t.(*slotTable)[i].Store(vaddr)
		a := page + uint64(i*cpu.UprobeSlotBytes)
		ts.sites[vaddr] = a
		return a
	}
	for _, page := range ts.vaddrs {
		t, _ := ts.slots.LoadOrStore(page, new(slotTable))
		for i := range t.(*slotTable) {
			a := page + uint64(i*cpu.UprobeSlotBytes)
			if t.(*slotTable)[i].Load() == 0 && isReachableByCall(a, vaddr) { // a jmp's reach is a call's
				return assign(page, i), true, false, nil
			}
		}
	}
	page, err := u.newTrampolineLocked(m, vaddr)
	if err != nil {
		return 0, false, false, err
	}
	return assign(page, 0), true, true, nil
}

// releaseSlotLocked frees the slot getSlotLocked just gave the site at
// vaddr, whose optimization failed before its jmp was written.
func (u *Uprobes) releaseSlotLocked(m *mm.MM, vaddr, slot uint64) {
	ts := u.trampsOf(m)
	delete(ts.sites, vaddr)
	page := slot &^ (pgtable.PageSize - 1)
	if t, ok := ts.slots.Load(page); ok {
		t.(*slotTable)[(slot-page)/cpu.UprobeSlotBytes].Store(0)
	}
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
// call (jmp-slot: a jmp) into a trampoline of m. (v6.19's
// __in_uprobe_trampoline() looks in current->mm, which for a removal by
// another process is the wrong mm; the live 6.18.44 kernel restores an
// optimized site detached by another process, live/uprobe's
// TestLiveRemoteUnregisterRestores, so the model looks in m, as the live
// kernel does.)
func (u *Uprobes) isOptimized(w locking.Waiter, m *mm.MM, vaddr uint64) (bool, error) {
	var insn [callInsnSize]byte
	if err := copyFromVaddr(w, m, vaddr, insn[:]); err != nil {
		return false, err
	}
	if insn[0] != u.opcode() {
		return false, nil
	}
	rel := int32(binary.LittleEndian.Uint32(insn[1:]))
	return u.inTrampolineLocked(m, vaddr+callInsnSize+uint64(int64(rel))), nil
}

// shouldOptimize mirrors should_optimize().
func (up *Uprobe) shouldOptimize() bool { return up.canOptimize && !up.optimizeFail.Load() }

// branchTo returns the 5-byte call or jmp (op) at vaddr to dest
// (__text_gen_insn).
func branchTo(op byte, vaddr, dest uint64) [callInsnSize]byte {
	insn := [callInsnSize]byte{op}
	binary.LittleEndian.PutUint32(insn[1:], uint32(dest-(vaddr+callInsnSize)))
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
// is checked (verify_insn: the site starts with a call, in the jmp-slot
// design a jmp, before the first, with an int3 before the others: EPERM
// otherwise) and followed by
// smp_text_poke_sync_each_cpu(), which also precedes the tail write. The
// last write is a removal (it may zap the page back to the file's) unless
// optimizing.
func (u *Uprobes) int3Update(w locking.Waiter, m *mm.MM, v *mm.VMA, vaddr uint64, insn [callInsnSize]byte, optimize bool, first int) error {
	if first <= writeInt3 {
		if err := u.checkedWrite(w, m, v, vaddr, writeInt3, []byte{swbp}, true, u.opcode()); err != nil {
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
	if u.hooks.textWrite != nil {
		u.hooks.textWrite(m, vaddr, n)
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
	var tramp uint64
	var isNew, newSlot bool
	var err error
	if u.opt == OptimizeJmpSlot {
		tramp, newSlot, isNew, err = u.getSlotLocked(m, vaddr)
	} else {
		tramp, isNew, err = u.getTrampolineLocked(m, vaddr)
	}
	if err != nil {
		up.optimizeFail.Store(true)
		return
	}
	if err := u.int3Update(r, m, v, vaddr, branchTo(u.opcode(), vaddr, tramp), true, writeTail); err != nil {
		if u.design == kernel.DesignBefore || u.hooks.undoNoWarn {
			u.warnOnce(warnOptimize)
		}
		if newSlot {
			u.releaseSlotLocked(m, vaddr, tramp)
		}
		if isNew {
			u.destroyTrampolineLocked(m, tramp&^(pgtable.PageSize-1))
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
			if err != nil && (u.design == kernel.DesignBefore || u.hooks.undoNoWarn) {
				u.warnOnce(warnSetOrigInsn)
			}
			return err
		}
		if u.design == kernel.DesignAfter && !u.hooks.undoFinish {
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
	if r.Regs.R[cpu.RAX] != uapi.NrUprobe {
		return false, 0
	}
	if u.opt == OptimizeJmpSlot {
		return true, u.sysUprobeSlot(r)
	}
	return true, u.sysUprobe(r)
}

// The words a jmp-slot slot pushes below the red zone, from the stack
// pointer up, and the red zone it stepped over.
const (
	slotAX = iota
	slotR11
	slotCX
	nSlotWords
	redZone = 128
)

// sysUprobeSlot is the uprobe syscall of the jmp-slot design: only a
// syscall at the end of an assigned slot of a trampoline of the task's mm
// is served (from anywhere else outside a trampoline: -ENXIO, as in the
// call design; a model choice: SIGILL from an unassigned slot or the
// middle of one, whose stack it cannot undo). The site's registers are
// restored (%rax, %r11 and %rcx from what the slot pushed, %rsp above them
// and the red zone), ip set to the site for the handlers, then to the site
// + 5 unless a handler moved it, and the task returns as through IRET,
// with every register as the handlers left it: nothing runs in the slot
// after the syscall. A stack that cannot be read is SIGILL.
func (u *Uprobes) sysUprobeSlot(r *kernel.Runner) kernel.Signal {
	regs := &r.Regs
	end := regs.RIP // just after the slot's syscall
	if !u.inUprobeTrampoline(r, end-1) {
		regs.R[cpu.RAX] = ^uint64(enxio) + 1 // -ENXIO
		return 0
	}
	page := (end - 1) &^ (pgtable.PageSize - 1)
	t, ok := u.tramps.Load(r.Task.MM)
	if !ok || (end-page)%cpu.UprobeSlotBytes != 0 {
		return sigill
	}
	tab, ok := t.(*trampolines).slots.Load(page)
	if !ok {
		return sigill
	}
	site := tab.(*slotTable)[(end-page)/cpu.UprobeSlotBytes-1].Load()
	if site == 0 {
		return sigill
	}
	var saved [nSlotWords]uint64
	if !loadWords(r, regs.R[cpu.RSP], saved[:]) {
		return sigill
	}
	regs.R[cpu.RAX], regs.R[cpu.R11], regs.R[cpu.RCX] = saved[slotAX], saved[slotR11], saved[slotCX]
	regs.R[cpu.RSP] += 8*nSlotWords + redZone
	regs.RIP = site
	u.handleSyscallUprobe(r, site)
	if regs.RIP == site {
		regs.RIP += callInsnSize
	}
	return 0
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
	if !loadWords(r, regs.R[cpu.RSP], args[:]) {
		return sigill
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

// loadWords reads len(dst) words of the task's stack from sp up
// (copy_from_user); false if one cannot be read.
func loadWords(r *kernel.Runner, sp uint64, dst []uint64) bool {
	c := r.Interp()
	for i := range dst {
		v, err := c.Load64(r, sp+uint64(8*i))
		if err != nil {
			return false
		}
		dst[i] = v
	}
	return true
}

// handleSyscallUprobe mirrors handle_syscall_uprobe(): handle_swbp's
// lookup and handlers in one read section of the flavour, without the
// instruction (the trampoline's return skips it) and without optimizing.
func (u *Uprobes) handleSyscallUprobe(r *kernel.Runner, bp uint64) {
	th := r.Task.Thread
	idx := u.flavor.ReadLock(th)
	defer func() { u.flavor.ReadUnlock(th, idx) }()
	sched.ChargeKernelInstructions(sysUprobeInstructions)
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
