package cpu

import (
	"bytes"
	"testing"

	"mmlab/uapi"
)

// TestTrampolinesDecode: every instruction of both trampolines is in the
// subset, and their lengths add up.
func TestTrampolinesDecode(t *testing.T) {
	t.Parallel()
	uret, check := UretprobeTrampoline()
	for _, code := range [][]byte{uret, UprobeTrampoline()} {
		var ops []Op
		for off := 0; off < len(code); {
			in, err := Decode(code[off:])
			if err != nil {
				t.Fatalf("% x at %d: %v", code, off, err)
			}
			if off == check && bytes.Equal(code, uret) && ops[len(ops)-1] != OpSyscall {
				t.Errorf("uretprobe_syscall_check (%d) does not follow the syscall", check)
			}
			ops = append(ops, in.Op)
			off += int(in.Len)
		}
		if ops[len(ops)-1] != OpInt3 || ops[len(ops)-2] != OpRet {
			t.Errorf("% x ends with %v", code, ops)
		}
	}
	in, _ := Decode(uret[4:])
	if in.Op != OpMovImm || in.Reg != RAX || in.Imm != uapi.NrUretprobe || !in.Wide || in.Len != 7 {
		t.Errorf("mov $335,%%rax decoded as %+v", in)
	}
}

// TestUretprobeTrampoline runs a function return through the x86-64
// uretprobe trampoline, with hooks doing what the kernel does: at the
// function's entry, arch_uretprobe_hijack_return_addr swaps the return
// address for the trampoline; sys_uretprobe (the Syscall hook) mirrors
// kernel/uprobes.c's SYSCALL_DEFINE0(uretprobe): it checks the caller's ip,
// takes the saved %r11, %rcx and %rax from the stack, runs the return
// handler with the function's registers, and leaves the original return
// address where the trampoline's ret pops it.
func TestUretprobeTrampoline(t *testing.T) {
	t.Parallel()
	code := asm(t, func(a *Asm) {
		a.Call("f").Hlt()
		a.Label("f").Nop().MovImm32(RAX, 42).Ret()
	})
	m, r := newTask(t, code)
	tramp, check := UretprobeTrampoline()
	m.poke(xolBase, tramp) // slot 0
	f := uint64(textBase + 6)
	m.poke(f, []byte{SwbpInsn})
	var c CPU
	var orig []uint64 // the task's return instances
	var retRAX uint64 // what the return handler saw
	nop, _ := Decode([]byte{0x90})
	h := &hooks{
		int3: func(r *Regs) bool { // handle_swbp for the probe on f
			r.RIP--
			ret, err := c.Load64(m, r.R[RSP])
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Store64(m, r.R[RSP], xolBase); err != nil {
				t.Fatal(err)
			}
			orig = append(orig, ret)
			return c.Emulate(&nop, r, m) == nil
		},
		syscall: func(r *Regs) bool {
			if r.R[RAX] != uapi.NrUretprobe || r.RIP != xolBase+uint64(check) {
				t.Fatalf("syscall %d from %#x", r.R[RAX], r.RIP)
			}
			sp := r.R[RSP]
			r11, _ := c.Load64(m, sp)
			cx, _ := c.Load64(m, sp+8)
			ax, _ := c.Load64(m, sp+16)
			r.R[R11], r.R[RCX], r.R[RAX] = r11, cx, ax
			ip := r.RIP
			// uprobe_handle_trampoline: pop the instance, run the
			// handler with the function's registers.
			retRAX = r.R[RAX]
			r.RIP, orig = orig[len(orig)-1], orig[:len(orig)-1]
			// The ax slot takes the return address for the ret.
			if err := c.Store64(m, sp+16, r.RIP); err != nil {
				t.Fatal(err)
			}
			// Back to the trampoline by sysret, which clobbers %r11
			// and %rcx: the trampoline pops their saved values.
			r.RIP = ip
			r.R[R11], r.R[RCX] = r.Flags, ip
			r.R[RAX] = ax // the syscall's return value
			return true
		},
	}
	r.R[RCX], r.R[R11] = 0xc, 0x11
	if s := c.Run(r, m, h); s.Reason != StopHalt {
		t.Fatalf("Run = %v at %#x", s, r.RIP)
	}
	if retRAX != 42 || r.R[RAX] != 42 || r.R[RCX] != 0xc || r.R[R11] != 0x11 {
		t.Errorf("handler saw rax %d; after: %v r11=%#x", retRAX, r, r.R[R11])
	}
	if r.RIP != textBase+6 || r.R[RSP] != stackTop || len(orig) != 0 {
		t.Errorf("returned to %#x with rsp %#x, %d instances left; want %#x, %#x, 0", r.RIP, r.R[RSP], len(orig), textBase+6, uint64(stackTop))
	}
}
