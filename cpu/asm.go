package cpu

import "fmt"

// Asm assembles the model's instruction subset, with labels, for tests and
// for the code model tasks run. Methods append one instruction and return a
// so calls chain:
//
//	a := cpu.NewAsm(0x401000)
//	a.MovImm32(cpu.RCX, 1000)
//	a.Label("loop").Call("f").Dec32(cpu.RCX).Jnz("loop").Hlt()
//	a.Label("f").Nop().Ret()
//	code, err := a.Assemble()
type Asm struct {
	base   uint64         // address of the first byte
	buf    []byte         // the code so far
	labels map[string]int // label → offset in buf
	fixups []asmFixup     // branch displacements to fill in by Assemble
	err    error          // first error, returned by Assemble
}

// asmFixup is a displacement of size bytes at buf[at:], relative to the end
// of its instruction at buf[end].
type asmFixup struct {
	at, size, end int
	label         string
}

// NewAsm returns an assembler for code that will sit at address base.
func NewAsm(base uint64) *Asm { return &Asm{base: base, labels: map[string]int{}} }

// PC is the address of the next instruction.
func (a *Asm) PC() uint64 { return a.base + uint64(len(a.buf)) }

// Label names the address of the next instruction.
func (a *Asm) Label(name string) *Asm {
	if _, dup := a.labels[name]; dup && a.err == nil {
		a.err = fmt.Errorf("cpu: asm: label %q defined twice", name)
	}
	a.labels[name] = len(a.buf)
	return a
}

// Addr returns the address of a label, or false if it is not defined (yet).
func (a *Asm) Addr(name string) (uint64, bool) {
	off, ok := a.labels[name]
	return a.base + uint64(off), ok
}

// Raw appends bytes as they are.
func (a *Asm) Raw(b ...byte) *Asm { a.buf = append(a.buf, b...); return a }

// rex appends a REX prefix when w is set or a register is r8..r15: r goes in
// ModRM.reg (REX.R), b in ModRM.rm or the opcode (REX.B).
func (a *Asm) rex(w bool, r, b int) {
	x := byte(0x40)
	if w {
		x |= 8
	}
	if r >= 8 {
		x |= 4
	}
	if b >= 8 {
		x |= 1
	}
	if x != 0x40 {
		a.buf = append(a.buf, x)
	}
}

// Nop is 90.
func (a *Asm) Nop() *Asm { return a.Raw(0x90) }

// Nop5 is the 5-byte NOP 0F 1F 44 00 00 (nopl 0x0(%rax,%rax,1)), the one
// an optimized uprobe turns into a call.
func (a *Asm) Nop5() *Asm { return a.Raw(0x0f, 0x1f, 0x44, 0x00, 0x00) }

// Push is push %reg: 50+r (41 50+r for r8..r15).
func (a *Asm) Push(reg int) *Asm { a.rex(false, 0, reg); return a.Raw(0x50 + byte(reg&7)) }

// Pop is pop %reg: 58+r (41 58+r for r8..r15).
func (a *Asm) Pop(reg int) *Asm { a.rex(false, 0, reg); return a.Raw(0x58 + byte(reg&7)) }

// Mov is the 64-bit mov %src,%dst: REX.W 89 /r. Mov(RBP, RSP) is 48 89 E5.
func (a *Asm) Mov(dst, src int) *Asm {
	a.rex(true, src, dst)
	return a.Raw(0x89, 0xc0|byte(src&7)<<3|byte(dst&7))
}

// MovImm32 is mov $v,%r32 (B8+r imm32), which zero-extends into the 64-bit
// register. MovImm32(RCX, n) is B9 n.
func (a *Asm) MovImm32(reg int, v uint32) *Asm {
	a.rex(false, 0, reg)
	return a.Raw(0xb8+byte(reg&7), byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}

// MovImm64 is movabs $v,%r64 (REX.W B8+r imm64).
func (a *Asm) MovImm64(reg int, v uint64) *Asm {
	a.rex(true, 0, reg)
	a.Raw(0xb8 + byte(reg&7))
	for i := range 8 {
		a.buf = append(a.buf, byte(v>>(8*i)))
	}
	return a
}

// Inc32 is inc %r32 (FF /0), Inc64 inc %r64 (REX.W FF /0). Dec32 is dec
// %r32 (FF /1): Dec32(RCX) is FF C9. Dec64 is dec %r64 (REX.W FF /1).
func (a *Asm) Inc32(reg int) *Asm { a.rex(false, 0, reg); return a.Raw(0xff, 0xc0|byte(reg&7)) }
func (a *Asm) Inc64(reg int) *Asm { a.rex(true, 0, reg); return a.Raw(0xff, 0xc0|byte(reg&7)) }
func (a *Asm) Dec32(reg int) *Asm { a.rex(false, 0, reg); return a.Raw(0xff, 0xc8|byte(reg&7)) }
func (a *Asm) Dec64(reg int) *Asm { a.rex(true, 0, reg); return a.Raw(0xff, 0xc8|byte(reg&7)) }

// rspDisp8 appends a 64-bit op with ModRM reg and the operand disp(%rsp):
// REX.W op ModRM(mod 01, rm 100) SIB(24) disp8.
func (a *Asm) rspDisp8(op byte, reg int, disp int8) *Asm {
	a.rex(true, reg, 0)
	return a.Raw(op, 0x44|byte(reg&7)<<3, 0x24, byte(disp))
}

// Store is mov %src,disp(%rsp) (REX.W 89 /r): Store(RDX, -8) is 48 89 54 24 F8.
func (a *Asm) Store(disp int8, src int) *Asm { return a.rspDisp8(0x89, src, disp) }

// Lea is lea disp(%rsp),%dst (REX.W 8D /r): Lea(RSP, -128) is 48 8D 64 24 80.
func (a *Asm) Lea(dst int, disp int8) *Asm { return a.rspDisp8(0x8d, dst, disp) }

// CmpMem is cmp %reg,disp(%rsp) (REX.W 39 /r): the flags of the stack word
// minus reg.
func (a *Asm) CmpMem(disp int8, reg int) *Asm { return a.rspDisp8(0x39, reg, disp) }

// Cmp32 is cmp %src,%dst at 32 bits (39 /r): the flags of dst minus src.
func (a *Asm) Cmp32(dst, src int) *Asm {
	a.rex(false, src, dst)
	return a.Raw(0x39, 0xc0|byte(src&7)<<3|byte(dst&7))
}

// Or32 is or %src,%dst at 32 bits (09 /r).
func (a *Asm) Or32(dst, src int) *Asm {
	a.rex(false, src, dst)
	return a.Raw(0x09, 0xc0|byte(src&7)<<3|byte(dst&7))
}

// OrImm32 is or $v,%r32: 83 /1 ib when v fits a signed byte, else 81 /1 id.
func (a *Asm) OrImm32(reg int, v int32) *Asm {
	a.rex(false, 0, reg)
	if v == int32(int8(v)) {
		return a.Raw(0x83, 0xc8|byte(reg&7), byte(v))
	}
	return a.Raw(0x81, 0xc8|byte(reg&7), byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}

// branch appends opcode bytes and a size-byte displacement to label.
func (a *Asm) branch(label string, size int, op ...byte) *Asm {
	a.buf = append(a.buf, op...)
	at := len(a.buf)
	a.buf = append(a.buf, make([]byte, size)...)
	a.fixups = append(a.fixups, asmFixup{at: at, size: size, end: len(a.buf), label: label})
	return a
}

// Call is call rel32 (E8).
func (a *Asm) Call(label string) *Asm { return a.branch(label, 4, 0xe8) }

// Jmp is jmp rel32 (E9); JmpShort is jmp rel8 (EB).
func (a *Asm) Jmp(label string) *Asm      { return a.branch(label, 4, 0xe9) }
func (a *Asm) JmpShort(label string) *Asm { return a.branch(label, 1, 0xeb) }

// Jcc is the rel8 conditional jump 70+cc; Jcc32 the rel32 one (0F 80+cc).
// Jnz is Jcc(5, …) (75 rel8), Jz is Jcc(4, …).
func (a *Asm) Jcc(cc uint8, label string) *Asm   { return a.branch(label, 1, 0x70|cc&0xf) }
func (a *Asm) Jcc32(cc uint8, label string) *Asm { return a.branch(label, 4, 0x0f, 0x80|cc&0xf) }
func (a *Asm) Jnz(label string) *Asm             { return a.Jcc(5, label) }
func (a *Asm) Jz(label string) *Asm              { return a.Jcc(4, label) }

// Loop is loop rel8 (E2): decrement %rcx, jump if it is not zero.
func (a *Asm) Loop(label string) *Asm { return a.branch(label, 1, 0xe2) }

// Ret is C3, Int3 is CC, Hlt is F4, Syscall is 0F 05.
func (a *Asm) Ret() *Asm     { return a.Raw(0xc3) }
func (a *Asm) Int3() *Asm    { return a.Raw(0xcc) }
func (a *Asm) Hlt() *Asm     { return a.Raw(0xf4) }
func (a *Asm) Syscall() *Asm { return a.Raw(0x0f, 0x05) }

// Assemble resolves the labels and returns the code.
func (a *Asm) Assemble() ([]byte, error) {
	if a.err != nil {
		return nil, a.err
	}
	out := append([]byte(nil), a.buf...)
	for _, f := range a.fixups {
		off, ok := a.labels[f.label]
		if !ok {
			return nil, fmt.Errorf("cpu: asm: undefined label %q", f.label)
		}
		d := int64(off - f.end)
		if f.size == 1 {
			if d < -128 || d > 127 {
				return nil, fmt.Errorf("cpu: asm: label %q is %d bytes away, too far for rel8", f.label, d)
			}
			out[f.at] = byte(d)
			continue
		}
		for i := range 4 {
			out[f.at+i] = byte(d >> (8 * i))
		}
	}
	return out, nil
}
