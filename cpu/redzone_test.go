package cpu

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// The new instructions, the jmp slot and the red-zone target are what GNU
// as produces for the same source.
func TestRedZoneAgainstGNUAs(t *testing.T) {
	t.Parallel()
	a := NewAsm(0)
	a.Store(-8, RDX).Store(-128, R9).Lea(RSP, -128).Lea(RAX, 16).CmpMem(-64, RDX).CmpMem(8, R11)
	a.Or32(RBX, RAX).Or32(R8, R9).Cmp32(RAX, RDI).Cmp32(R10, RCX).OrImm32(RAX, 1).OrImm32(RAX, 0x80).OrImm32(R10, -2).Inc64(RDX).Inc64(R12)
	ours, err := a.Assemble()
	if err != nil {
		t.Fatal(err)
	}
	theirs := gnuAs(t, `
	mov %rdx, -8(%rsp)
	mov %r9, -128(%rsp)
	lea -128(%rsp), %rsp
	lea 16(%rsp), %rax
	cmp %rdx, -64(%rsp)
	cmp %r11, 8(%rsp)
	or %eax, %ebx
	or %r9d, %r8d
	cmp %edi, %eax
	cmp %ecx, %r10d
	or $1, %eax
	.byte 0x81, 0xc8, 0x80, 0, 0, 0 # or $0x80,%eax in its generic form (as picks 0d)
	or $-2, %r10d
	inc %rdx
	inc %r12
`)
	if !bytes.Equal(ours, theirs) {
		t.Errorf("ours\n% x\nGNU as\n% x", ours, theirs)
	}
	slot := gnuAs(t, "lea -128(%rsp), %rsp\npush %rcx\npush %r11\npush %rax\nmov $336, %eax\nsyscall\n")
	if got := UprobeSlot(); !bytes.Equal(got, slot) || len(got) != UprobeSlotBytes {
		t.Errorf("slot % x, GNU as % x", got, slot)
	}
	var src strings.Builder
	fmt.Fprintf(&src, "movabs $%#x, %%rdx\n", uint64(RedZonePattern))
	for i := range RedZoneSlots {
		fmt.Fprintf(&src, "mov %%rdx, %d(%%rsp)\n", -8*(i+1))
		if i < RedZoneSlots-1 {
			src.WriteString("inc %rdx\n")
		}
	}
	// nopl 0x0(%rax,%rax,1) with its disp8 (as drops a zero one).
	fmt.Fprintf(&src, "nop\n.byte 0x0f, 0x1f, 0x44, 0, 0\nmov $0, %%eax\nmovabs $%#x, %%rdx\n", uint64(RedZonePattern))
	for i := range RedZoneSlots {
		or := fmt.Sprintf("or $%d, %%eax", 1<<i)
		if 1<<i > 127 {
			or = fmt.Sprintf(".byte 0x81, 0xc8, %d, 0, 0, 0", 1<<i)
		}
		fmt.Fprintf(&src, "cmp %%rdx, %d(%%rsp)\nje 1f\n%s\n1:\n", -8*(i+1), or)
		if i < RedZoneSlots-1 {
			src.WriteString("inc %rdx\n")
		}
	}
	src.WriteString("ret\n")
	code, nopAt, nop5At := RedZoneTarget()
	if want := gnuAs(t, src.String()); !bytes.Equal(code, want) {
		t.Errorf("red-zone target\n% x\nGNU as\n% x", code, want)
	}
	if code[nopAt] != 0x90 || !bytes.Equal(code[nop5At:nop5At+5], []byte{0x0f, 0x1f, 0x44, 0x00, 0x00}) {
		t.Errorf("sites at %d and %d: % x", nopAt, nop5At, code[nopAt:nop5At+5])
	}
}

// The red-zone target returns 0 when nothing touched its words, and the
// mask of exactly the words an int3 handler at its nop site overwrote;
// rdx, rax and the flags are all it changes besides the words.
func TestRedZoneTarget(t *testing.T) {
	t.Parallel()
	code, nopAt, _ := RedZoneTarget()
	prog := append([]byte{0xe8, 1, 0, 0, 0, 0xf4}, code...) // call target; hlt; target
	for _, clobber := range [][]int{nil, {1}, {0, 3}, {7}, {0, 1, 2, 3, 4, 5, 6, 7}} {
		m, r := newTask(t, prog)
		r.R[RSP] = stackTop - 0x200
		r.R[RBX], r.R[RCX], r.R[R11] = 1, 2, 3
		before := *r
		h := &hooks{int3: func(r *Regs) bool {
			for _, i := range clobber {
				m.write64(r.R[RSP]-uint64(8*(i+1)), 0)
			}
			return true // rip is after the 0xCC: the nop is done
		}}
		m.poke(textBase+6+uint64(nopAt), []byte{0xcc})
		if s := new(CPU).Run(r, m, h); s.Reason != StopHalt {
			t.Fatalf("clobber %v: %v", clobber, s)
		}
		want := uint64(0)
		for _, i := range clobber {
			want |= 1 << i
		}
		if r.R[RAX] != want {
			t.Errorf("clobber %v: mask %#x, want %#x", clobber, r.R[RAX], want)
		}
		got := *r
		got.R[RAX], got.R[RDX], got.RIP, got.Flags = before.R[RAX], before.R[RDX], before.RIP, before.Flags
		if got != before {
			t.Errorf("clobber %v: registers %v, want %v but rax, rdx, flags", clobber, &got, &before)
		}
	}
}

// cmp sets the flags of a-b, or those of the result, as jcc reads them.
func TestCmpOrFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		wide       bool
		a, b       uint64
		cc         uint8 // a condition that must hold
		notCC      uint8 // one that must not
		desc       string
		orZero     bool // a|b == 0
		orNegative bool
	}{
		{true, 5, 5, 4, 5, "equal", false, false},                // je, not jne
		{true, 4, 5, 2, 3, "below", false, false},                // jb, not jae
		{true, 1 << 63, 1, 0, 1, "signed overflow", false, true}, // jo, not jno
		{true, ^uint64(0), 1, 0xc, 0x2, "-1 < 1 signed, not below unsigned", false, true},
		{false, 0x1_0000_0005, 5, 4, 5, "equal at 32 bits", false, false},
		{false, 0, 0, 4, 5, "zero", true, false},
	} {
		f := subFlags(c.wide, c.a, c.b, FlagCF|FlagZF)
		if !cond(c.cc, f) || cond(c.notCC, f) {
			t.Errorf("%s: cmp flags %#x: j%s %v, j%s %v", c.desc, f, ccNames[c.cc], cond(c.cc, f), ccNames[c.notCC], cond(c.notCC, f))
		}
		res, of := or(c.wide, c.a, c.b, FlagCF|FlagOF)
		if of&(FlagCF|FlagOF) != 0 || (of&FlagZF != 0) != c.orZero || (of&FlagSF != 0) != c.orNegative {
			t.Errorf("%s: or %#x flags %#x", c.desc, res, of)
		}
	}
}
