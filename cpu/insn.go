package cpu

import (
	"errors"
	"fmt"
)

// MaxInsnLen is the longest x86 instruction (and the kernel's
// MAX_UINSN_BYTES is 16, one more).
const MaxInsnLen = 15

// An Op is what an instruction does.
type Op uint8

// The operations of the model's instruction subset.
const (
	OpNop     Op = iota + 1 // 90, 66 90, 0F 1F /0 (nopl/nopw, any length), mov %r,%r (64-bit)
	OpPush                  // 50+r, 41 50+r: push r64
	OpPop                   // 58+r, 41 58+r: pop r64
	OpMov                   // [REX] 89 /r with mod=11: mov r32/r64 to r32/r64
	OpMovImm                // [REX] B8+r imm32 (zero-extended), REX.W B8+r imm64
	OpCall                  // E8 rel32
	OpRet                   // C3
	OpJmp                   // E9 rel32, EB rel8
	OpJcc                   // 70+cc rel8, 0F 80+cc rel32
	OpLoop                  // E2 rel8: dec rcx (flags untouched), jump if rcx != 0
	OpInc                   // [REX] FF /0 with mod=11: inc r32/r64
	OpDec                   // [REX] FF /1 with mod=11: dec r32/r64
	OpInt3                  // CC
	OpHlt                   // F4
	OpSyscall               // 0F 05
	OpStore                 // REX.W 89 /r to disp8(%rsp): mov r64 to the stack (Src, Imm the displacement)
	OpLea                   // REX.W 8D /r from disp8(%rsp): lea disp8(%rsp),r64 (Reg, Imm)
	OpCmp                   // [REX] 39 /r: cmp r32/r64 with r32/r64 (mod=11) or, REX.W, with disp8(%rsp) (Mem)
	OpOr                    // [REX] 09 /r with mod=11: or r32/r64 into r32/r64 (Src into Reg)
	OpOrImm                 // [REX] 83 /1 ib, 81 /1 id with mod=11: or $imm (sign-extended) into r32/r64
)

var opNames = [...]string{OpNop: "nop", OpPush: "push", OpPop: "pop", OpMov: "mov", OpMovImm: "mov",
	OpCall: "call", OpRet: "ret", OpJmp: "jmp", OpJcc: "jcc", OpLoop: "loop", OpInc: "inc",
	OpDec: "dec", OpInt3: "int3", OpHlt: "hlt", OpSyscall: "syscall", OpStore: "mov", OpLea: "lea",
	OpCmp: "cmp", OpOr: "or", OpOrImm: "or"}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("op%d", o)
}

// A Class is how a uprobe on the instruction is handled, as x86's
// arch_uprobe_analyze_insn() decides it.
type Class uint8

const (
	// Emulate: the hit path executes the instruction itself
	// (arch_uprobe_skip_sstep): every NOP (insn_is_nop), jmp rel8/rel32,
	// call rel32, jcc rel8/rel32 (branch_setup_xol_ops), and push r64
	// without a prefix or with REX 0x41 only (push_setup_xol_ops). The
	// model follows v6.19, whose insn_is_nop() also counts mov %reg,%reg;
	// the live 6.18 kernel single-steps that one (TestLiveClasses).
	Emulate Class = iota + 1
	// XOL: single-stepped out of line, in a slot of the XOL page, then fixed
	// up by PostXOL (default_xol_ops).
	XOL
	// Reject: a uprobe cannot be placed here (-ENOTSUPP): int3 is already a
	// trap (is_trap_insn) and hlt is not in good_insns_64. (syscall is
	// accepted, as XOL: uprobe_init_insn() tests good_2byte_insns, where
	// 0f 05 is bad, only if the first opcode byte fails good_insns_64, and
	// 0x0f passes it. On the live 6.18 kernel a probed syscall is accepted,
	// and the task dies of SIGSEGV at its first hit.)
	Reject
)

func (c Class) String() string {
	switch c {
	case Emulate:
		return "emulate"
	case XOL:
		return "xol"
	case Reject:
		return "reject"
	}
	return fmt.Sprintf("class%d", c)
}

// Insn is a decoded instruction.
type Insn struct {
	Op    Op
	Class Class
	Len   uint8 // bytes, prefixes included
	Reg   uint8 // push/pop/inc/dec/mov-imm register, mov destination
	Src   uint8 // mov source register
	Cond  uint8 // jcc condition (the low nibble of 70+cc)
	Wide  bool  // 64-bit operand (REX.W) for mov, mov-imm, inc, dec, cmp, or
	Mem   bool  // cmp: the first operand is Imm(%rsp), not Reg
	Imm   int64 // branch displacement (sign-extended), immediate, or the displacement from %rsp
}

func (in Insn) String() string {
	reg := func(n uint8) string {
		if in.Wide || in.Op == OpPush || in.Op == OpPop {
			return RegName(int(n))
		}
		return reg32Names[n&15]
	}
	switch in.Op {
	case OpPush, OpPop, OpInc, OpDec:
		return fmt.Sprintf("%v %s", in.Op, reg(in.Reg))
	case OpMov:
		return fmt.Sprintf("mov %s,%s", reg(in.Reg), reg(in.Src))
	case OpMovImm:
		return fmt.Sprintf("mov %s,%#x", reg(in.Reg), uint64(in.Imm))
	case OpStore:
		return fmt.Sprintf("mov [rsp%+d],%s", in.Imm, RegName(int(in.Src)))
	case OpLea:
		return fmt.Sprintf("lea %s,[rsp%+d]", RegName(int(in.Reg)), in.Imm)
	case OpCmp:
		if in.Mem {
			return fmt.Sprintf("cmp [rsp%+d],%s", in.Imm, reg(in.Src))
		}
		return fmt.Sprintf("cmp %s,%s", reg(in.Reg), reg(in.Src))
	case OpOr:
		return fmt.Sprintf("or %s,%s", reg(in.Reg), reg(in.Src))
	case OpOrImm:
		return fmt.Sprintf("or %s,%#x", reg(in.Reg), in.Imm)
	case OpCall, OpJmp, OpLoop:
		return fmt.Sprintf("%v .%+d", in.Op, in.Imm+int64(in.Len))
	case OpJcc:
		return fmt.Sprintf("j%s .%+d", ccNames[in.Cond], in.Imm+int64(in.Len))
	}
	return in.Op.String()
}

var reg32Names = [16]string{"eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi",
	"r8d", "r9d", "r10d", "r11d", "r12d", "r13d", "r14d", "r15d"}

var ccNames = [16]string{"o", "no", "b", "ae", "e", "ne", "be", "a", "s", "ns", "p", "np", "l", "ge", "le", "g"}

// CanOptimize reports whether a uprobe at vaddr on this instruction may be
// turned into a call to the uprobe trampoline (x86-64, v6.18+): a 5-byte NOP
// that does not cross a page. Mirrors arch/x86/kernel/uprobes.c:can_optimize().
func (in Insn) CanOptimize(vaddr uint64) bool {
	return in.Op == OpNop && in.Len == 5 && PageSize-vaddr%PageSize >= 5
}

var (
	// ErrUndefined: the bytes are not an instruction of the model's subset.
	// The CPU raises #UD (SIGILL) for them. (A real CPU knows many more;
	// the kernel's decoder would accept them and return -ENOEXEC only for
	// truly undecodable bytes.)
	ErrUndefined = errors.New("cpu: instruction not in the model's subset")
	// ErrTruncated: the bytes end before the instruction does.
	ErrTruncated = errors.New("cpu: truncated instruction")
)

// Decode decodes the instruction at the start of b, with the uprobe class
// that arch/x86/kernel/uprobes.c:arch_uprobe_analyze_insn() would give it
// (uprobe_init_insn's good_insns_64 test, then branch_setup_xol_ops() and
// push_setup_xol_ops(); see Class).
func Decode(b []byte) (Insn, error) {
	var in Insn
	err := decode(&in, b)
	return in, err
}

// decode decodes into *in (which it zeroes first): passing a pointer lets
// the CPU's fetch keep the instruction in place instead of copying a struct
// written a byte at a time (a store-forwarding stall on every instruction).
func decode(in *Insn, b []byte) error {
	*in = Insn{}
	i := 0
	if len(b) == 0 {
		return ErrTruncated
	}
	p66 := b[0] == 0x66
	if p66 {
		i++
	}
	var rex byte
	if i < len(b) && b[i]&0xf0 == 0x40 {
		rex = b[i]
		i++
	}
	if i >= len(b) {
		return ErrTruncated
	}
	op := b[i]
	i++
	rexB := (rex & 1) << 3
	in.Wide = rex&8 != 0
	switch {
	case op == 0x90:
		if rexB != 0 { // xchg %r8,%rax
			return ErrUndefined
		}
		in.Op, in.Class = OpNop, Emulate
	case op >= 0x50 && op <= 0x5f:
		if p66 {
			return ErrUndefined
		}
		in.Reg = op&7 | rexB
		if op < 0x58 {
			in.Op, in.Class = OpPush, XOL
			if rex == 0 || rex == 0x41 {
				in.Class = Emulate
			}
		} else {
			in.Op, in.Class = OpPop, XOL
		}
	case op == 0x89 || op == 0x8d || op == 0x39 || op == 0x09 || op == 0x83 || op == 0x81 || op == 0xff:
		if p66 {
			return ErrUndefined
		}
		if i >= len(b) {
			return ErrTruncated
		}
		modrm := b[i]
		i++
		reg, rm := (modrm>>3)&7|(rex&4)<<1, modrm&7|rexB
		in.Class = XOL
		if modrm>>6 != 3 { // memory operands: only disp8(%rsp), 64-bit, for 89, 8d and 39
			if modrm>>6 != 1 || modrm&7 != 4 || !in.Wide || rex&3 != 0 || (op != 0x89 && op != 0x8d && op != 0x39) {
				return ErrUndefined
			}
			if i+2 > len(b) {
				if i < len(b) && b[i] != 0x24 {
					return ErrUndefined
				}
				return ErrTruncated
			}
			if b[i] != 0x24 { // SIB: base %rsp, no index
				return ErrUndefined
			}
			in.Imm = int64(int8(b[i+1]))
			i += 2
			switch op {
			case 0x89:
				in.Op, in.Src = OpStore, reg
			case 0x8d:
				in.Op, in.Reg = OpLea, reg
			default:
				in.Op, in.Src, in.Mem = OpCmp, reg, true
			}
			break
		}
		in.Reg = rm
		switch op {
		case 0x89:
			in.Op, in.Src = OpMov, reg
			if in.Wide && reg == rm { // insn_is_nop: mov %reg,%reg at native size
				in.Op, in.Class = OpNop, Emulate
			}
		case 0x39:
			in.Op, in.Src = OpCmp, reg
		case 0x09:
			in.Op, in.Src = OpOr, reg
		case 0xff:
			switch reg & 7 {
			case 0:
				in.Op = OpInc
			case 1:
				in.Op = OpDec
			default:
				return ErrUndefined
			}
		case 0x83, 0x81:
			if reg&7 != 1 {
				return ErrUndefined
			}
			n := 1
			if op == 0x81 {
				n = 4
			}
			if i+n > len(b) {
				return ErrTruncated
			}
			in.Op, in.Imm = OpOrImm, int64(int8(b[i]))
			if n == 4 {
				in.Imm = int64(int32(uint32(b[i]) | uint32(b[i+1])<<8 | uint32(b[i+2])<<16 | uint32(b[i+3])<<24))
			}
			i += n
		default: // 8d with a register operand is #UD
			return ErrUndefined
		}
	case op == 0xc7: // mov $imm32,%r32 or, with REX.W, sign-extended to %r64
		if p66 {
			return ErrUndefined
		}
		if i+5 > len(b) {
			if i < len(b) && (b[i]>>6 != 3 || (b[i]>>3)&7 != 0) {
				return ErrUndefined
			}
			return ErrTruncated
		}
		if modrm := b[i]; modrm>>6 != 3 || (modrm>>3)&7 != 0 {
			return ErrUndefined
		}
		in.Op, in.Class, in.Reg = OpMovImm, XOL, b[i]&7|rexB
		imm := int32(uint32(b[i+1]) | uint32(b[i+2])<<8 | uint32(b[i+3])<<16 | uint32(b[i+4])<<24)
		in.Imm = int64(imm) // sign-extended for REX.W; run zero-extends the 32-bit form
		i += 5
	case op >= 0xb8 && op <= 0xbf:
		if p66 {
			return ErrUndefined
		}
		in.Op, in.Class, in.Reg = OpMovImm, XOL, op&7|rexB
		n := 4
		if in.Wide {
			n = 8
		}
		if i+n > len(b) {
			return ErrTruncated
		}
		var v uint64
		for k := n - 1; k >= 0; k-- {
			v = v<<8 | uint64(b[i+k])
		}
		in.Imm = int64(v)
		i += n
	case op == 0xe8 || op == 0xe9 || op == 0xeb || op == 0xe2 || op&0xf0 == 0x70:
		if p66 { // branch_setup_xol_ops refuses 16-bit overrides
			return ErrUndefined
		}
		switch op {
		case 0xe8:
			in.Op, in.Class = OpCall, Emulate
		case 0xe9, 0xeb:
			in.Op, in.Class = OpJmp, Emulate
		case 0xe2: // not a jcc for branch_setup_xol_ops: single-stepped with FIX_IP
			in.Op, in.Class = OpLoop, XOL
		default:
			in.Op, in.Class, in.Cond = OpJcc, Emulate, op&0xf
		}
		if op == 0xe8 || op == 0xe9 {
			if i+4 > len(b) {
				return ErrTruncated
			}
			in.Imm = int64(int32(uint32(b[i]) | uint32(b[i+1])<<8 | uint32(b[i+2])<<16 | uint32(b[i+3])<<24))
			i += 4
		} else {
			if i >= len(b) {
				return ErrTruncated
			}
			in.Imm = int64(int8(b[i]))
			i++
		}
	case op == 0xc3 || op == 0xcc || op == 0xf4:
		if p66 || rex != 0 {
			return ErrUndefined
		}
		switch op {
		case 0xc3:
			in.Op, in.Class = OpRet, XOL
		case 0xcc:
			in.Op, in.Class = OpInt3, Reject
		default:
			in.Op, in.Class = OpHlt, Reject
		}
	case op == 0x0f:
		if i >= len(b) {
			return ErrTruncated
		}
		op2 := b[i]
		i++
		switch {
		case op2 == 0x1f:
			if i >= len(b) {
				return ErrTruncated
			}
			if (b[i]>>3)&7 != 0 { // only 0f 1f /0 is NOPL for insn_is_nop
				return ErrUndefined
			}
			n, ok := modrmLen(b[i:])
			if !ok {
				return ErrTruncated
			}
			i += n
			in.Op, in.Class = OpNop, Emulate
		case op2 == 0x05 && !p66 && rex == 0:
			in.Op, in.Class = OpSyscall, XOL
		case op2&0xf0 == 0x80 && !p66:
			if i+4 > len(b) {
				return ErrTruncated
			}
			in.Op, in.Class, in.Cond = OpJcc, Emulate, op2&0xf
			in.Imm = int64(int32(uint32(b[i]) | uint32(b[i+1])<<8 | uint32(b[i+2])<<16 | uint32(b[i+3])<<24))
			i += 4
		default:
			return ErrUndefined
		}
	default:
		return ErrUndefined
	}
	in.Len = uint8(i)
	return nil
}

// modrmLen returns the length of the ModRM byte at b[0] with its SIB and
// displacement, or false if b is too short for them.
func modrmLen(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, false
	}
	mod, rm := b[0]>>6, b[0]&7
	n := 1
	if mod != 3 && rm == 4 { // SIB
		if len(b) < 2 {
			return 0, false
		}
		if mod == 0 && b[1]&7 == 5 {
			n += 4 // no base: disp32
		}
		n++
	}
	switch {
	case mod == 1:
		n++
	case mod == 2, mod == 0 && rm == 5: // disp32 (mod 0, rm 5: rip-relative)
		n += 4
	}
	if n > len(b) {
		return 0, false
	}
	return n, true
}

// ErrRestart is PostXOL's answer when the instruction must be restarted
// at its original address (the -ERESTART of branch_post_xol_op()).
var ErrRestart = errors.New("cpu: restart the probed instruction")

// PostXOL fixes up r after in, the instruction of a uprobe at vaddr, was
// single-stepped in the XOL slot at xol, so that the task continues as if the
// instruction had run at vaddr. Mirrors arch/x86/kernel/uprobes.c
// arch_uprobe_post_xol()'s ops->post_xol:
//   - default_post_xol_op() for XOL instructions: UPROBE_FIX_IP (ip +=
//     vaddr - xol) for everything but ret, whose ip is already right (no
//     instruction of the subset needs UPROBE_FIX_CALL or a rip-relative
//     fix-up; rip-relative NOPs are emulated);
//   - branch_post_xol_op() for call rel32, which is only stepped out of line
//     when its emulation failed to push: pop the return address and restart;
//   - nothing for the other emulated instructions (push_xol_ops has no
//     post_xol; jmp, jcc and NOPs always emulate).
//
// It does not touch TF: clearing it (unless the user had set it) is the
// caller's part of arch_uprobe_post_xol().
func (in *Insn) PostXOL(r *Regs, vaddr, xol uint64) error {
	switch {
	case in.Op == OpCall:
		r.R[RSP] += 8
		r.RIP = vaddr
		return ErrRestart
	case in.Class == Emulate, in.Op == OpRet:
	default:
		r.RIP += vaddr - xol
	}
	return nil
}
