package cpu

import (
	"fmt"
	"strconv"

	"mmlab/errno"
)

// General-purpose register numbers, as x86 encodes them in opcodes, ModRM and
// REX bits. They index Regs.R.
const (
	RAX = iota
	RCX
	RDX
	RBX
	RSP
	RBP
	RSI
	RDI
	R8
	R9
	R10
	R11
	R12
	R13
	R14
	R15
)

var regNames = [16]string{"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
	"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"}

// RegName returns the lower-case name of register n ("rbp").
func RegName(n int) string {
	if n >= 0 && n < len(regNames) {
		return regNames[n]
	}
	return "r?" + strconv.Itoa(n)
}

// RFLAGS bits the model computes or reads (the x86 X86_EFLAGS_* values).
const (
	FlagCF uint64 = 1 << 0  // carry: read by jcc only; dec/inc leave it alone
	FlagPF uint64 = 1 << 2  // parity of the result's low byte
	FlagAF uint64 = 1 << 4  // carry out of bit 3
	FlagZF uint64 = 1 << 6  // zero
	FlagSF uint64 = 1 << 7  // sign
	FlagTF uint64 = 1 << 8  // trap: #DB after the next instruction (single-step)
	FlagOF uint64 = 1 << 11 // signed overflow
)

// Regs is the user register state of a task (the model's struct pt_regs).
type Regs struct {
	R     [16]uint64 // general registers, indexed by RAX..R15
	RIP   uint64     // address of the next instruction
	Flags uint64     // RFLAGS; only the Flag* bits have meaning
}

func (r *Regs) String() string {
	return fmt.Sprintf("rip=%#x rsp=%#x rbp=%#x rax=%#x rcx=%#x flags=%#x",
		r.RIP, r.R[RSP], r.R[RBP], r.R[RAX], r.R[RCX], r.Flags)
}

// A Vector is an x86 exception vector.
type Vector uint8

// The exceptions the model raises.
const (
	VectorDB Vector = 1  // #DB: debug (single-step trap)
	VectorBP Vector = 3  // #BP: int3
	VectorUD Vector = 6  // #UD: invalid opcode (here: not in the model's subset)
	VectorPF Vector = 14 // #PF: page fault
)

func (v Vector) String() string {
	switch v {
	case VectorDB:
		return "#DB"
	case VectorBP:
		return "#BP"
	case VectorUD:
		return "#UD"
	case VectorPF:
		return "#PF"
	}
	return "#" + strconv.Itoa(int(v))
}

// A Fault is an exception raised by an instruction. A faulting instruction
// has no effect: RIP still points at it and no register or memory changed,
// so the instruction can be restarted, as on x86.
type Fault struct {
	Vector Vector
	Signal errno.Signal // what the kernel would deliver: SIGILL for #UD, SIGSEGV or SIGBUS for #PF
	RIP    uint64       // the faulting instruction
	Addr   uint64       // #PF: the address that faulted (CR2)
	Access Access       // #PF: the access that faulted
	Err    error        // #PF: the Memory's error
}

func (f *Fault) Error() string {
	if f.Vector == VectorPF {
		return fmt.Sprintf("%v at rip %#x: %v of %#x: %v", f.Vector, f.RIP, f.Access, f.Addr, f.Err)
	}
	return fmt.Sprintf("%v at rip %#x: %v", f.Vector, f.RIP, f.Signal)
}

func (f *Fault) Unwrap() error { return f.Err }
