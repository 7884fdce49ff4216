// Package cpu is the model's x86-64 CPU: a small interpreter that runs a
// task's code fetched through the task's own page tables, so that an int3
// (0xCC) written into a text page really traps, and the task's stack lives in
// its own address space (push, pop, call and ret read and write memory through
// Memory, so copy-on-write and faults happen as they would).
//
// The instruction subset (see Op) is what the uprobe experiments run: NOPs,
// push/pop, mov between registers and of immediates, mov of a register to
// disp8(%rsp), lea and cmp with disp8(%rsp), cmp and or of registers, or of
// immediates, call rel32, ret, jmp, jcc, loop, inc/dec, int3, syscall and
// hlt. Anything else raises #UD (SIGILL).
//
// Besides Run, the package gives the uprobes code what arch/x86 gives
// kernel/events/uprobes.c: Decode classifies an instruction as emulated,
// single-stepped out of line, or refused (arch_uprobe_analyze_insn);
// CPU.Emulate executes an emulated one at its original address
// (arch_uprobe_skip_sstep); Insn.PostXOL fixes registers up after a
// single-step in an XOL slot (arch_uprobe_post_xol).
//
// # What the CPU caches
//
// A CPU caches translations, like an x86 TLB over coherent caches. It keeps a
// 4-entry instruction TLB and a 4-entry data TLB, each direct-mapped by
// virtual page number; an entry holds the storage (Bytes) of the Page that
// Memory.Page returned for that virtual page and whether it was obtained for
// a write (a writable, already copied-on-write translation). Every fetch and
// every data access reads the cached Page's current bytes, so a byte written
// into a Page the CPU has cached is seen at the next fetch. But when the page
// table changes (a breakpoint installed by copy-on-write of a text page, fork
// write-protecting the parent's pages, munmap, a COW break by another
// thread), the CPU may go on using the Page it cached until Flush is called
// on it, as a CPU may go on using a stale TLB entry until the kernel's
// TLB-flush IPI reaches it (or until the entry is evicted: the model's TLBs
// are small, and a miss asks Memory again). Run starts with a flushed TLB (a task switch
// reloads CR3); Step does not.
//
// It also keeps the decodings of the last 64 instructions it fetched (by the
// low bits of RIP), each with the up to 8 bytes it was decoded from. A fetch
// reads those bytes again through the TLB and uses the decoding only if they
// are unchanged, so this cache saves decoding, never fetching: it can make
// no difference to what runs, and Flush does not need to clear it.
//
// # Concurrency
//
// A CPU is used by one goroutine, its model CPU's thread. Flush, Emulate,
// Step, Load64 and Store64 may be called from the hooks of a Run on the same
// CPU (that is where an IPI or the uprobe hit path runs) or when the CPU is
// not running. Memory.Page, which runs in the middle of an instruction, may
// sleep and may Flush the CPU, but must not execute instructions on it.
package cpu

import (
	"encoding/binary"
	"errors"
	"fmt"

	"mmlab/errno"
)

// Page geometry: 4 KiB pages, as on x86-64.
const (
	PageShift = 12
	PageSize  = 1 << PageShift
)

// An Access is the kind of memory access that needs a page.
type Access uint8

// Access kinds.
const (
	Exec  Access = iota // instruction fetch
	Read                // data read
	Write               // data write
)

func (a Access) String() string {
	switch a {
	case Exec:
		return "exec"
	case Read:
		return "read"
	case Write:
		return "write"
	}
	return fmt.Sprintf("access%d", a)
}

// Memory is a task's address space as the CPU sees it. It is implemented by
// the kernel glue over mm.
//
// The CPU caches what Page returns (see "What the CPU caches"), so whoever
// changes a PTE of an address space must Flush every CPU running it before
// relying on the change, as the kernel's TLB shootdown does: breakpoint
// install and removal, fork's write-protection of the parent's private pages
// (dup_mmap's flush_tlb_mm), munmap, mprotect, mremap, and COW breaks by
// other threads.
type Memory interface {
	// Page returns the page that holds addr for an access, faulting it in
	// if needed: Exec needs an executable mapping, Read a readable one and
	// Write a writable one, whose copy-on-write Page breaks, so the page it
	// returns for Write is the task's private copy. A non-nil error is the
	// fault to deliver; SIGSEGV or SIGBUS (an errno.Signal) says which, any
	// other error means SIGSEGV.
	Page(addr uint64, access Access) (Page, error)
}

// Page is one 4 KiB page of memory. *pgtable.Page satisfies it.
//
// Bytes returns the page's PageSize bytes of storage, which the CPU reads and
// writes directly, as a CPU addresses physical memory: one slice per
// translation, no call per byte. (A page never written may allocate its
// storage here; the model has no shared zero page.)
type Page interface {
	Bytes() []byte
}

// Hooks are the kernel's side of the CPU: its exception handlers and the
// point where it can interrupt a running task.
type Hooks interface {
	// Poll is called at every instruction boundary, before the fetch: the
	// point where the model CPU takes IPIs and notices preemption. It
	// must be cheap when it has nothing to do. Returning true stops Run
	// with StopPoll before the next instruction.
	Poll() (stop bool)
	// Int3 is called after an int3 executed, with r.RIP pointing after the
	// 0xCC as on x86 (the uprobe code rewinds it). Returning false stops
	// Run with StopInt3.
	Int3(r *Regs) (resume bool)
	// Syscall is called after a syscall instruction, with r.RIP after it,
	// %rcx holding that address and %r11 the flags (the CPU's part of
	// syscall). The hook is the kernel: it reads the number in %rax,
	// writes the result there, and may change any register (the x86-64
	// uretprobe and uprobe trampolines enter the kernel this way).
	// Execution goes on at r.RIP as the hook leaves it. Returning false
	// stops Run with StopSyscall.
	Syscall(r *Regs) (resume bool)
	// SingleStep is called after one instruction completed that started
	// with TF set (the #DB trap of a single-step out of line). Returning
	// false stops Run with StopSingleStep.
	SingleStep(r *Regs) (resume bool)
	// Fault is called when an instruction faulted; r is unchanged (RIP at
	// the faulting instruction). Returning false stops Run with StopFault.
	Fault(r *Regs, f Fault) (resume bool)
}

// NoHooks is a Hooks that never interrupts and never resumes: every trap and
// fault ends Run.
type NoHooks struct{}

func (NoHooks) Poll() bool              { return false }
func (NoHooks) Int3(*Regs) bool         { return false }
func (NoHooks) Syscall(*Regs) bool      { return false }
func (NoHooks) SingleStep(*Regs) bool   { return false }
func (NoHooks) Fault(*Regs, Fault) bool { return false }

// Reason says why Run or Step returned.
type Reason uint8

// Reasons.
const (
	Stepped        Reason = iota + 1 // Step: the instruction completed (or a hook resumed)
	StopHalt                         // hlt executed; RIP points after it
	StopInt3                         // Int3 declined to resume; RIP points after the 0xCC
	StopSingleStep                   // SingleStep declined to resume
	StopFault                        // Fault declined to resume; Stop.Fault says what
	StopPoll                         // Poll asked to stop; RIP is the next instruction
	StopSyscall                      // Syscall declined to resume; RIP points after the syscall
)

// Stop is the result of Run and Step.
type Stop struct {
	Reason Reason
	Fault  Fault // for StopFault
}

var reasonNames = [...]string{"", "stepped", "halt", "int3", "single-step", "fault", "poll", "syscall"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) && r != 0 {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason%d", r)
}

func (s Stop) String() string {
	if s.Reason == StopFault {
		return "fault: " + s.Fault.Error()
	}
	return s.Reason.String()
}

// A CPU runs tasks' code. The zero value is ready to use.
type CPU struct {
	itlb, dtlb tlb
	decoded    [decodedSize]decodedInsn
	scratch    Insn  // an instruction fetched across a page boundary
	fault      Fault // the fault of the last instruction that ended in evFault
}

// decodedSize entries in the decoded-instruction cache, direct-mapped by
// the low bits of RIP.
const decodedSize = 64

// decodedInsn remembers the decoding of the instruction bytes last fetched at
// rip. It is used only if the bytes now at rip are the same, so it never
// makes the CPU see stale code: it saves decoding, not fetching.
type decodedInsn struct {
	rip   uint64
	mask  uint64 // covers the instruction's Len bytes; 0: empty entry
	bytes uint64 // the instruction's bytes, little-endian
	in    Insn
}

// tlbSize entries per TLB, direct-mapped by virtual page number.
const tlbSize = 4

type tlb [tlbSize]tlbEntry

// tlbEntry caches one translation: virtual page vpn is page.
type tlbEntry struct {
	vpn   uint64          // virtual page number; the entry is valid when mem != nil
	mem   *[PageSize]byte // the Page's Bytes()
	write bool            // obtained by a Write access: writable without a fault
}

// Flush drops every cached translation, like a full TLB flush. Call it on
// the CPU (from a hook of its Run, i.e. in the model's IPI) after the page
// table of the address space it runs changed.
func (c *CPU) Flush() {
	c.itlb = tlb{}
	c.dtlb = tlb{}
}

// SyncCore is a serializing instruction (sync_core(), the handler of the
// kernel's text-poke sync IPI): the CPU drops the instructions it decoded,
// so everything it executes next is fetched and decoded again. (The model
// CPU checks the bytes of a cached decoding at every fetch anyway, so this
// changes what it costs, not what it runs.) Call it as Flush. Only the
// entries' masks are cleared: the instruction in flight (an IPI may run
// while it waits for a page) keeps its decoding.
func (c *CPU) SyncCore() {
	for i := range c.decoded {
		c.decoded[i].mask = 0
	}
}

// translate returns the page storage for addr from the TLB, asking mem on a
// miss (or when a write finds a translation obtained by a read). It returns
// the storage, not the entry: mem.Page may sleep, and a task that slept is
// flushed (switch_mm), which clears entries translated before.
func (c *CPU) translate(t *tlb, mem Memory, addr uint64, acc Access) (*[PageSize]byte, error) {
	vpn := addr >> PageShift
	e := &t[vpn%tlbSize]
	if e.mem != nil && e.vpn == vpn && (acc != Write || e.write) {
		return e.mem, nil
	}
	if err := c.fill(e, mem, addr, acc); err != nil {
		return nil, err
	}
	return e.mem, nil
}

// fill is translate's miss: it asks mem and refills e (after mem.Page
// returns, so that a Flush inside mem.Page does not undo it).
func (c *CPU) fill(e *tlbEntry, mem Memory, addr uint64, acc Access) error {
	p, err := mem.Page(addr, acc)
	if err != nil {
		return err
	}
	b := p.Bytes()
	if len(b) != PageSize {
		panic(fmt.Sprintf("cpu: Memory.Page(%#x) returned a page of %d bytes", addr, len(b)))
	}
	*e = tlbEntry{vpn: addr >> PageShift, mem: (*[PageSize]byte)(b), write: acc == Write}
	return nil
}

// Run executes the task whose registers are r in the address space mem until
// hlt, a trap or fault the hooks do not resume from, or Poll asks to stop.
func (c *CPU) Run(r *Regs, mem Memory, h Hooks) Stop {
	c.Flush()
	s, _ := c.run(r, mem, h, false, nil)
	return c.stop(s)
}

// Resume is Run with the TLB as it is: for a caller that knows no
// translation it holds went stale since its last Run (the kernel's
// switch_mm_irqs_off() keeps a CPU's TLB when the mm's tlb_gen has not
// moved).
func (c *CPU) Resume(r *Regs, mem Memory, h Hooks) Stop {
	s, _ := c.run(r, mem, h, false, nil)
	return c.stop(s)
}

// Step executes exactly one instruction at r.RIP, with the same trap and
// fault handling as Run but without Poll, and with the TLB as it is. It is how a single-step out of line
// can be driven directly: put the copied instruction in the XOL slot, point
// r.RIP at it, set TF, Step, and fix up in the SingleStep hook (PostXOL).
func (c *CPU) Step(r *Regs, mem Memory, h Hooks) Stop {
	s, _ := c.run(r, mem, h, true, nil)
	return c.stop(s)
}

func (c *CPU) stop(s Reason) Stop {
	if s == StopFault {
		return Stop{Reason: s, Fault: c.fault}
	}
	return Stop{Reason: s}
}

// Emulate executes in, an instruction of class Emulate, as if it were at
// r.RIP, without fetching it: the uprobe hit path's way past the breakpoint.
// On a fault it returns the *Fault and leaves r and memory unchanged (the
// kernel then single-steps out of line, which faults again and delivers the
// signal properly). Mirrors arch/x86/kernel/uprobes.c:
// arch_uprobe_skip_sstep() (branch_emulate_op(), push_emulate_op() and the
// NOP case); like it, it ignores TF: sending SIGTRAP when TF is set is the
// caller's part.
func (c *CPU) Emulate(in *Insn, r *Regs, mem Memory) error {
	if in.Class != Emulate {
		return fmt.Errorf("cpu: %v is not emulated (class %v)", in, in.Class)
	}
	if _, ev := c.run(r, mem, nil, true, in); ev == evFault {
		f := c.fault
		return &f
	}
	return nil
}

// trap runs the hook for how an instruction ended: ev, or the single-step
// trap of an instruction that completed with TF set.
func (c *CPU) trap(ev event, r *Regs, h Hooks) Reason {
	switch ev {
	case evNext:
		if !h.SingleStep(r) {
			return StopSingleStep
		}
	case evInt3:
		if !h.Int3(r) {
			return StopInt3
		}
	case evSyscall:
		if !h.Syscall(r) {
			return StopSyscall
		}
	case evHalt:
		return StopHalt
	case evFault:
		if !h.Fault(r, c.fault) {
			return StopFault
		}
	}
	return Stepped
}

// cached returns the decoded instruction at rip if both its translation and
// its decoding are cached and the bytes at rip are still the ones decoded;
// otherwise nil. It is fetch's hit path, small enough to be inlined in run.
func (c *CPU) cached(rip uint64) *Insn {
	e := &c.itlb[rip>>PageShift%tlbSize]
	d := &c.decoded[rip%decodedSize]
	if e.vpn != rip>>PageShift || e.mem == nil || rip%PageSize > PageSize-8 || d.rip != rip {
		return nil
	}
	if binary.LittleEndian.Uint64(e.mem[rip%PageSize:])&d.mask != d.bytes || d.mask == 0 {
		return nil
	}
	return &d.in
}

// fetch decodes the instruction at r.RIP, when cached found nothing, and
// remembers the decoding. The Insn it returns is valid until the next fetch.
// On failure it sets c.fault and returns nil.
func (c *CPU) fetch(r *Regs, mem Memory) *Insn {
	rip := r.RIP
	vpn := rip >> PageShift
	e := &c.itlb[vpn%tlbSize] // translate(), inlined by hand
	if e.mem == nil || e.vpn != vpn {
		if err := c.fill(e, mem, rip, Exec); err != nil {
			c.setPF(rip, rip, Exec, err)
			return nil
		}
	}
	off := rip % PageSize
	if off > PageSize-8 {
		return c.fetchTail(e, r, mem)
	}
	w := binary.LittleEndian.Uint64(e.mem[off:])
	d := &c.decoded[rip%decodedSize]
	d.mask = 0
	end := min(off+MaxInsnLen, PageSize)
	if err := decode(&d.in, e.mem[off:end]); err != nil {
		if err == ErrTruncated && end == PageSize {
			return c.fetchCross(r, mem)
		}
		c.setUD(rip)
		return nil
	}
	if d.in.Len <= 8 {
		d.rip, d.mask = rip, ^uint64(0)>>(64-8*d.in.Len)
		d.bytes = w & d.mask
	}
	return &d.in
}

// fetchTail decodes an instruction in the last 8 bytes of a page.
func (c *CPU) fetchTail(e *tlbEntry, r *Regs, mem Memory) *Insn {
	in := &c.scratch
	err := decode(in, e.mem[r.RIP%PageSize:])
	if err == nil {
		return in
	}
	if err == ErrTruncated {
		return c.fetchCross(r, mem)
	}
	c.setUD(r.RIP)
	return nil
}

// fetchCross fetches an instruction that may cross into the next page, a
// byte at a time, so that it faults on the next page only if the instruction
// really extends into it.
func (c *CPU) fetchCross(r *Regs, mem Memory) *Insn {
	var buf [MaxInsnLen]byte
	in := &c.scratch
	rip := r.RIP
	for n := range MaxInsnLen {
		a := rip + uint64(n)
		p, err := c.translate(&c.itlb, mem, a, Exec)
		if err != nil {
			c.setPF(rip, a, Exec, err)
			return nil
		}
		buf[n] = p[a%PageSize]
		err = decode(in, buf[:n+1])
		if err == nil {
			return in
		}
		if err != ErrTruncated {
			break
		}
	}
	c.setUD(rip)
	return nil
}

//go:noinline
func (c *CPU) setUD(rip uint64) {
	c.fault = Fault{Vector: VectorUD, Signal: errno.SIGILL, RIP: rip, Addr: rip, Access: Exec}
}

//go:noinline
func (c *CPU) setPF(rip, addr uint64, acc Access, err error) {
	sig := errno.SIGSEGV
	errors.As(err, &sig)
	c.fault = Fault{Vector: VectorPF, Signal: sig, RIP: rip, Addr: addr, Access: acc, Err: err}
}

// dpage returns the cached page holding the 8 bytes at addr, if the data
// TLB has it (for a write: with a write translation) and they do not cross a
// page; otherwise nil. It is small enough to be inlined.
func (c *CPU) dpage(addr uint64, write bool) *[PageSize]byte {
	vpn := addr >> PageShift
	e := &c.dtlb[vpn%tlbSize]
	if e.vpn == vpn && (e.write || !write) && addr%PageSize <= PageSize-8 {
		return e.mem
	}
	return nil
}

// load reads the 8 bytes at addr for the instruction at rip: from the data
// TLB's page, else by loadSlow. On a fault it sets c.fault and returns
// false. The fast path and the call of the slow one exceed the inliner's
// budget, so load and store are one call per data access of the loop.
func (c *CPU) load(mem Memory, rip, addr uint64) (uint64, bool) {
	if p := c.dpage(addr, false); p != nil {
		return binary.LittleEndian.Uint64(p[addr%PageSize:]), true
	}
	return c.loadSlow(mem, rip, addr)
}

// store writes v to the 8 bytes at addr for the instruction at rip, as load
// reads them.
func (c *CPU) store(mem Memory, rip, addr, v uint64) bool {
	if p := c.dpage(addr, true); p != nil {
		binary.LittleEndian.PutUint64(p[addr%PageSize:], v)
		return true
	}
	return c.storeSlow(mem, rip, addr, v)
}

func (c *CPU) loadSlow(mem Memory, rip, addr uint64) (uint64, bool) {
	v, a, err := c.load64(mem, addr)
	if err != nil {
		c.setPF(rip, a, Read, err)
		return 0, false
	}
	return v, true
}

// storeSlow and loadSlow are the data accesses that miss the data TLB or
// cross a page. On a fault they set c.fault and return false.
func (c *CPU) storeSlow(mem Memory, rip, addr, v uint64) bool {
	if a, err := c.store64(mem, addr, v); err != nil {
		c.setPF(rip, a, Write, err)
		return false
	}
	return true
}

// load64 reads the 8 bytes at addr. On a fault it returns the faulting address
// and the Memory's error.
func (c *CPU) load64(mem Memory, addr uint64) (uint64, uint64, error) {
	p, err := c.translate(&c.dtlb, mem, addr, Read)
	if err != nil {
		return 0, addr, err
	}
	off := int(addr % PageSize)
	if off <= PageSize-8 {
		return binary.LittleEndian.Uint64(p[off:]), 0, nil
	}
	next := addr - uint64(off) + PageSize
	p2, err := c.translate(&c.dtlb, mem, next, Read)
	if err != nil {
		return 0, next, err
	}
	var b [8]byte
	n := copy(b[:], p[off:])
	copy(b[n:], p2[:])
	return binary.LittleEndian.Uint64(b[:]), 0, nil
}

// store64 writes v at addr, or nothing if either page it touches faults.
func (c *CPU) store64(mem Memory, addr, v uint64) (uint64, error) {
	p, err := c.translate(&c.dtlb, mem, addr, Write)
	if err != nil {
		return addr, err
	}
	off := int(addr % PageSize)
	if off <= PageSize-8 {
		binary.LittleEndian.PutUint64(p[off:], v)
		return 0, nil
	}
	next := addr - uint64(off) + PageSize
	p2, err := c.translate(&c.dtlb, mem, next, Write)
	if err != nil {
		return next, err
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	n := copy(p[off:], b[:])
	copy(p2[:], b[n:])
	return 0, nil
}
