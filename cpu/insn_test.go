package cpu

import (
	"bytes"
	"errors"
	"testing"
)

// TestDecode checks lengths, operations and the uprobe class of each
// instruction. The classes are arch/x86/kernel/uprobes.c's: branch_setup_xol_ops
// emulates insn_is_nop() NOPs (nopl /0, mov %r,%r at 64 bits, jmp +0),
// jmp rel8/rel32, call rel32 and jcc (70-7f, 0f 80-8f), but not loop (e2);
// push_setup_xol_ops emulates push r64 only without prefix or with REX 0x41;
// int3 is refused (is_trap_insn) and hlt (f4) is 0 in good_insns_64; every
// 0f xx passes good_insns_64 (0x0f is marked good), so syscall is stepped
// out of line. TestLiveClasses checks these against the running kernel.
func TestDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code  []byte
		op    Op
		class Class
		len   int
		check func(Insn) bool
	}{
		{[]byte{0x90}, OpNop, Emulate, 1, nil},
		{[]byte{0x66, 0x90}, OpNop, Emulate, 2, nil},
		{[]byte{0x0f, 0x1f, 0x00}, OpNop, Emulate, 3, nil},
		{[]byte{0x0f, 0x1f, 0x40, 0x00}, OpNop, Emulate, 4, nil},
		{[]byte{0x0f, 0x1f, 0x44, 0x00, 0x00}, OpNop, Emulate, 5, nil},
		{[]byte{0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00}, OpNop, Emulate, 6, nil},
		{[]byte{0x0f, 0x1f, 0x80, 0, 0, 0, 0}, OpNop, Emulate, 7, nil},
		{[]byte{0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0}, OpNop, Emulate, 8, nil},
		{[]byte{0x66, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0}, OpNop, Emulate, 9, nil},
		{[]byte{0x0f, 0x1f, 0x05, 1, 2, 3, 4}, OpNop, Emulate, 7, nil}, // rip-relative nopl
		{[]byte{0x48, 0x89, 0xed}, OpNop, Emulate, 3, nil},             // mov %rbp,%rbp
		{[]byte{0x89, 0xed}, OpMov, XOL, 2, nil},                       // mov %ebp,%ebp zero-extends: not a nop
		{[]byte{0x55}, OpPush, Emulate, 1, func(in Insn) bool { return in.Reg == RBP }},
		{[]byte{0x41, 0x55}, OpPush, Emulate, 2, func(in Insn) bool { return in.Reg == R13 }},
		{[]byte{0x48, 0x55}, OpPush, XOL, 2, func(in Insn) bool { return in.Reg == RBP }},
		{[]byte{0x5d}, OpPop, XOL, 1, func(in Insn) bool { return in.Reg == RBP }},
		{[]byte{0x41, 0x5f}, OpPop, XOL, 2, func(in Insn) bool { return in.Reg == R15 }},
		{[]byte{0x48, 0x89, 0xe5}, OpMov, XOL, 3, func(in Insn) bool { return in.Reg == RBP && in.Src == RSP && in.Wide }},
		{[]byte{0x4c, 0x89, 0xc7}, OpMov, XOL, 3, func(in Insn) bool { return in.Reg == RDI && in.Src == R8 }},
		{[]byte{0xb9, 0x78, 0x56, 0x34, 0x12}, OpMovImm, XOL, 5, func(in Insn) bool { return in.Reg == RCX && in.Imm == 0x12345678 && !in.Wide }},
		{[]byte{0x49, 0xbb, 8, 7, 6, 5, 4, 3, 2, 1}, OpMovImm, XOL, 10, func(in Insn) bool { return in.Reg == R11 && in.Imm == 0x0102030405060708 }},
		{[]byte{0x48, 0xc7, 0xc0, 0x4f, 0x01, 0, 0}, OpMovImm, XOL, 7, func(in Insn) bool { return in.Reg == RAX && in.Imm == 335 && in.Wide }},
		{[]byte{0xc7, 0xc1, 1, 0, 0, 0x80}, OpMovImm, XOL, 6, func(in Insn) bool { return in.Reg == RCX && !in.Wide }},
		{[]byte{0xe8, 0xfb, 0xff, 0xff, 0xff}, OpCall, Emulate, 5, func(in Insn) bool { return in.Imm == -5 }},
		{[]byte{0xc3}, OpRet, XOL, 1, nil},
		{[]byte{0xe9, 0x00, 0x01, 0x00, 0x00}, OpJmp, Emulate, 5, func(in Insn) bool { return in.Imm == 0x100 }},
		{[]byte{0xeb, 0xfe}, OpJmp, Emulate, 2, func(in Insn) bool { return in.Imm == -2 }},
		{[]byte{0x75, 0xf0}, OpJcc, Emulate, 2, func(in Insn) bool { return in.Cond == 5 && in.Imm == -16 }},
		{[]byte{0x0f, 0x84, 0x10, 0, 0, 0}, OpJcc, Emulate, 6, func(in Insn) bool { return in.Cond == 4 && in.Imm == 16 }},
		{[]byte{0xe2, 0xfe}, OpLoop, XOL, 2, func(in Insn) bool { return in.Imm == -2 }},
		{[]byte{0xff, 0xc9}, OpDec, XOL, 2, func(in Insn) bool { return in.Reg == RCX && !in.Wide }},
		{[]byte{0x48, 0xff, 0xc9}, OpDec, XOL, 3, func(in Insn) bool { return in.Reg == RCX && in.Wide }},
		{[]byte{0xff, 0xc0}, OpInc, XOL, 2, func(in Insn) bool { return in.Reg == RAX }},
		{[]byte{0xcc}, OpInt3, Reject, 1, nil},
		{[]byte{0xf4}, OpHlt, Reject, 1, nil},
		{[]byte{0x0f, 0x05}, OpSyscall, XOL, 2, nil},
		{[]byte{0x48, 0x89, 0x54, 0x24, 0xf8}, OpStore, XOL, 5, func(in Insn) bool { return in.Src == RDX && in.Imm == -8 }},
		{[]byte{0x4c, 0x89, 0x4c, 0x24, 0x10}, OpStore, XOL, 5, func(in Insn) bool { return in.Src == R9 && in.Imm == 16 }},
		{[]byte{0x48, 0x8d, 0x64, 0x24, 0x80}, OpLea, XOL, 5, func(in Insn) bool { return in.Reg == RSP && in.Imm == -128 }},
		{[]byte{0x48, 0x39, 0x54, 0x24, 0xc0}, OpCmp, XOL, 5, func(in Insn) bool { return in.Mem && in.Src == RDX && in.Imm == -64 }},
		{[]byte{0x39, 0xf8}, OpCmp, XOL, 2, func(in Insn) bool { return !in.Mem && in.Reg == RAX && in.Src == RDI && !in.Wide }},
		{[]byte{0x09, 0xc3}, OpOr, XOL, 2, func(in Insn) bool { return in.Reg == RBX && in.Src == RAX }},
		{[]byte{0x83, 0xc8, 0xfe}, OpOrImm, XOL, 3, func(in Insn) bool { return in.Reg == RAX && in.Imm == -2 }},
		{[]byte{0x41, 0x81, 0xca, 0x80, 0, 0, 0}, OpOrImm, XOL, 7, func(in Insn) bool { return in.Reg == R10 && in.Imm == 0x80 }},
	}
	for _, tt := range tests {
		// Trailing bytes must not change the decoding.
		in, err := Decode(append(append([]byte(nil), tt.code...), 0xcc, 0xcc))
		if err != nil {
			t.Errorf("% x: %v", tt.code, err)
			continue
		}
		if in.Op != tt.op || in.Class != tt.class || int(in.Len) != tt.len {
			t.Errorf("% x: got %v class %v len %d, want %v class %v len %d", tt.code, in.Op, in.Class, in.Len, tt.op, tt.class, tt.len)
		}
		if tt.check != nil && !tt.check(in) {
			t.Errorf("% x: operands wrong: %+v", tt.code, in)
		}
		// Every proper prefix of the instruction is truncated.
		for n := range tt.len {
			if _, err := Decode(tt.code[:n]); !errors.Is(err, ErrTruncated) {
				t.Errorf("% x: prefix of %d bytes: got %v, want ErrTruncated", tt.code, n, err)
			}
		}
	}

	for _, code := range [][]byte{
		{0x0f, 0x0b},                   // ud2
		{0xf3, 0x90},                   // pause (rep nop): not a NOP for insn_is_nop
		{0x49, 0x90},                   // xchg %r8,%rax
		{0x66, 0xe8, 0, 0},             // callw: branch_setup_xol_ops refuses 66
		{0x0f, 0x1f, 0x48, 0x00},       // 0f 1f /1: a hint NOP, not /0
		{0xff, 0x45, 0x00},             // inc 0(%rbp): memory operand
		{0xff, 0xd0},                   // call *%rax
		{0xc7, 0x00, 0, 0, 0, 0},       // movl $0,(%rax)
		{0xc7, 0xc8, 0, 0, 0, 0},       // c7 /1 is not mov
		{0x48, 0x8d, 0xc0},             // lea with a register operand
		{0x48, 0x89, 0x55, 0xf8},       // mov %rdx,-8(%rbp): only %rsp-relative
		{0x89, 0x54, 0x24, 0xf8},       // mov %edx,-8(%rsp): only 64-bit stores
		{0x49, 0x89, 0x54, 0x24, 0xf8}, // mov %rdx,-8(%r12)
		{0x48, 0x89, 0x54, 0x25, 0xf8}, // SIB with an index
		{0x83, 0xc0, 0x01},             // add $1,%eax: only 83 /1 (or)
		{0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0},
	} {
		if in, err := Decode(code); !errors.Is(err, ErrUndefined) {
			t.Errorf("% x: got %v, %v; want ErrUndefined", code, in, err)
		}
	}
}

func TestAsmEncodings(t *testing.T) {
	t.Parallel()
	a := NewAsm(0x1000)
	a.Label("top").Nop().Nop5().Push(RBP).Mov(RBP, RSP).Pop(RBP).MovImm32(RCX, 7).Dec32(RCX)
	a.Jnz("top").Call("top").Loop("top").Jmp("top").JmpShort("top").Ret().Int3().Hlt().Push(R13)
	got, err := a.Assemble()
	if err != nil {
		t.Fatal(err)
	}
	// The encodings the brief and the kernel's x86 references give.
	want := []byte{
		0x90,
		0x0f, 0x1f, 0x44, 0x00, 0x00,
		0x55,
		0x48, 0x89, 0xe5,
		0x5d,
		0xb9, 7, 0, 0, 0,
		0xff, 0xc9,
		0x75, 0xec, // at 0x12, ends at 0x14: -0x14
		0xe8, 0xe7, 0xff, 0xff, 0xff, // at 0x14, ends at 0x19
		0xe2, 0xe5, // at 0x19, ends at 0x1b
		0xe9, 0xe0, 0xff, 0xff, 0xff, // at 0x1b, ends at 0x20
		0xeb, 0xde, // at 0x20, ends at 0x22
		0xc3, 0xcc, 0xf4,
		0x41, 0x55,
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("assembled\n% x\nwant\n% x", got, want)
	}
	if addr, ok := a.Addr("top"); !ok || addr != 0x1000 {
		t.Errorf("Addr(top) = %#x, %v", addr, ok)
	}
	// Every instruction decodes back to its own length.
	for off := 0; off < len(got); {
		in, err := Decode(got[off:])
		if err != nil {
			t.Fatalf("decode at %#x: %v", off, err)
		}
		off += int(in.Len)
	}

	more := NewAsm(0x2000)
	more.MovImm64(R9, 0x1122334455667788).Inc32(R8).Dec64(RAX).Label("x").Jcc32(0xc, "x").Jz("x")
	if more.PC() != 0x2000+10+3+3+6+2 {
		t.Errorf("PC = %#x", more.PC())
	}
	got, err = more.Assemble()
	if err != nil {
		t.Fatal(err)
	}
	want = []byte{
		0x49, 0xb9, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // movabs $…,%r9
		0x41, 0xff, 0xc0, // inc %r8d
		0x48, 0xff, 0xc8, // dec %rax
		0x0f, 0x8c, 0xfa, 0xff, 0xff, 0xff, // jl x (to itself)
		0x74, 0xf8, // jz x
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("assembled\n% x\nwant\n% x", got, want)
	}
	if _, err := NewAsm(0).Label("a").Label("a").Assemble(); err == nil {
		t.Error("duplicate label assembled")
	}

	if _, err := NewAsm(0).Jnz("nowhere").Assemble(); err == nil {
		t.Error("undefined label assembled")
	}
	far := NewAsm(0).Label("x")
	for range 200 {
		far.Nop()
	}
	if _, err := far.JmpShort("x").Assemble(); err == nil {
		t.Error("rel8 out of range assembled")
	}
}
