package cpu

import (
	"bytes"
	"errors"
	"testing"
)

// xolSlot is slot 1 of the XOL page (slot 0 is the uretprobe trampoline);
// slots are UPROBE_XOL_SLOT_BYTES = 128 bytes.
const xolSlot = xolBase + 128

// passProbe executes the instruction at vaddr the way the uprobe hit path
// does after its handlers ran: emulate it if x86 emulates it, otherwise copy
// it into an XOL slot, single-step it there with TF set and fix up in the #DB
// (arch_uprobe_pre_xol / arch_uprobe_post_xol).
func passProbe(t *testing.T, c *CPU, r *Regs, m *fakeMem, vaddr uint64) {
	t.Helper()
	code := m.peek(vaddr, MaxInsnLen)
	in, err := Decode(code)
	if err != nil {
		t.Fatal(err)
	}
	r.RIP = vaddr
	switch in.Class {
	case Emulate:
		if err := c.Emulate(&in, r, m); err != nil {
			t.Fatal(err)
		}
	case XOL:
		m.poke(xolSlot, code[:in.Len]) // xol_get_insn_slot copies ixol
		r.RIP = xolSlot
		r.Flags |= FlagTF
		h := &hooks{singleStep: func(r *Regs) bool {
			if err := in.PostXOL(r, vaddr, xolSlot); err != nil {
				t.Fatal(err)
			}
			r.Flags &^= FlagTF // the user had not set it
			return true
		}}
		if s := c.Step(r, m, h); s.Reason != Stepped {
			t.Fatalf("XOL step: %v", s)
		}
	default:
		t.Fatalf("%v: class %v", in, in.Class)
	}
}

// TestOutOfLineLikeOriginal: every instruction, executed past a probe by
// emulation or out of line, leaves registers and memory exactly as executing
// it in place does.
func TestOutOfLineLikeOriginal(t *testing.T) {
	t.Parallel()
	const vaddr = textBase + 0x123
	tests := []struct {
		name  string
		code  []byte
		class Class
		setup func(r *Regs)
	}{
		{"nop", []byte{0x90}, Emulate, nil},
		{"nop5", []byte{0x0f, 0x1f, 0x44, 0, 0}, Emulate, nil},
		{"push rbp", []byte{0x55}, Emulate, nil},
		{"push r13", []byte{0x41, 0x55}, Emulate, nil},
		{"push rbp with REX.W", []byte{0x48, 0x55}, XOL, nil},
		{"pop rbp", []byte{0x5d}, XOL, nil},
		{"mov rbp,rsp", []byte{0x48, 0x89, 0xe5}, XOL, nil},
		{"mov ecx,imm32", []byte{0xb9, 1, 2, 3, 4}, XOL, nil},
		{"dec ecx", []byte{0xff, 0xc9}, XOL, nil},
		{"call forward", []byte{0xe8, 0x00, 0x10, 0, 0}, Emulate, nil},
		{"call backward", []byte{0xe8, 0x00, 0xf0, 0xff, 0xff}, Emulate, nil},
		{"ret", []byte{0xc3}, XOL, nil},
		{"jmp rel32", []byte{0xe9, 0x40, 0, 0, 0}, Emulate, nil},
		{"jmp rel8 back", []byte{0xeb, 0x80}, Emulate, nil},
		{"jnz taken", []byte{0x75, 0x30}, Emulate, nil},
		{"jnz not taken", []byte{0x75, 0x30}, Emulate, func(r *Regs) { r.Flags |= FlagZF }},
		{"jl rel32 taken", []byte{0x0f, 0x8c, 0x00, 0x01, 0, 0}, Emulate, func(r *Regs) { r.Flags |= FlagOF }},
		{"loop taken", []byte{0xe2, 0xf0}, XOL, nil},
		{"loop not taken", []byte{0xe2, 0xf0}, XOL, func(r *Regs) { r.R[RCX] = 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, r := newTask(t, nil)
			m.poke(vaddr, tt.code)
			sp := uint64(stackTop - 0x80)
			m.write64(sp, textBase+0x777) // a return address for ret and pop
			r.R[RSP], r.R[RBP], r.R[RCX], r.R[R13] = sp, 0xb0b0, 5, 0x1313
			if tt.setup != nil {
				tt.setup(r)
			}
			if in, _ := Decode(tt.code); in.Class != tt.class {
				t.Fatalf("class %v, want %v", in.Class, tt.class)
			}

			mRef, rRef := m.clone(), *r
			rRef.RIP = vaddr
			if s := new(CPU).Step(&rRef, mRef, NoHooks{}); s.Reason != Stepped {
				t.Fatalf("in place: %v", s)
			}
			passProbe(t, new(CPU), r, m, vaddr)

			if *r != rRef {
				t.Errorf("past the probe\n %v\nin place\n %v", r, &rRef)
			}
			stack := func(m *fakeMem) []byte { return m.peek(stackBase, 4*PageSize) }
			if !bytes.Equal(stack(m), stack(mRef)) {
				t.Errorf("stacks differ")
			}
		})
	}
}

// TestCallOutOfLineRestarts: when emulating a call cannot push the return
// address, x86 single-steps it out of line (with its offset cleared, so it
// only traps); if that push works after all (another thread grew the
// stack), branch_post_xol_op pops the wrong return address and restarts the
// call at its original address, where emulation now succeeds.
func TestCallOutOfLineRestarts(t *testing.T) {
	t.Parallel()
	const vaddr = textBase + 0x40
	call := []byte{0xe8, 0x00, 0x02, 0, 0}
	m, r := newTask(t, nil)
	m.poke(vaddr, call)
	r.RIP = vaddr
	in, err := Decode(call)
	if err != nil {
		t.Fatal(err)
	}
	var c CPU
	m.denyWrite = true
	before := *r
	err = c.Emulate(&in, r, m)
	var f *Fault
	if !errors.As(err, &f) || f.Access != Write || *r != before {
		t.Fatalf("Emulate with a read-only stack: %v, regs %v", err, r)
	}
	m.denyWrite = false                       // the stack became writable meanwhile
	m.poke(xolSlot, []byte{0xe8, 0, 0, 0, 0}) // branch_clear_offset: call 1f
	r.RIP, r.Flags = xolSlot, r.Flags|FlagTF
	var postErr error
	h := &hooks{singleStep: func(r *Regs) bool {
		postErr = in.PostXOL(r, vaddr, xolSlot)
		r.Flags &^= FlagTF
		return true
	}}
	if s := c.Step(r, m, h); s.Reason != Stepped {
		t.Fatal(s)
	}
	if postErr != ErrRestart || *r != before {
		t.Fatalf("PostXOL: %v, regs %v; want ErrRestart and the original regs %v", postErr, r, &before)
	}
	if err := c.Emulate(&in, r, m); err != nil || r.RIP != vaddr+5+0x200 || m.read64(stackTop-8) != vaddr+5 {
		t.Errorf("second emulation: %v, regs %v", err, r)
	}
}

func TestEmulateOnlyEmulated(t *testing.T) {
	t.Parallel()
	m, r := newTask(t, nil)
	for _, code := range [][]byte{{0x5d}, {0xc3}, {0xcc}} {
		in, err := Decode(code)
		if err != nil {
			t.Fatal(err)
		}
		before := *r
		if err := new(CPU).Emulate(&in, r, m); err == nil || *r != before {
			t.Errorf("% x (%v): Emulate = %v", code, in.Class, err)
		}
	}
}

func TestCanOptimize(t *testing.T) {
	t.Parallel()
	nop5, _ := Decode([]byte{0x0f, 0x1f, 0x44, 0, 0})
	nop1, _ := Decode([]byte{0x90})
	if !nop5.CanOptimize(0x401000) || !nop5.CanOptimize(0x401ffb) || nop5.CanOptimize(0x401ffc) || nop1.CanOptimize(0x401000) {
		t.Error("CanOptimize: a 5-byte NOP that does not cross a page, only")
	}
}
