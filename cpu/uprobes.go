package cpu

import "mmlab/uapi"

// The x86 facts of uprobes, from arch/x86/include/asm/uprobes.h and
// arch/x86/kernel/uprobes.c.
const (
	SwbpInsn      = 0xcc // UPROBE_SWBP_INSN: the breakpoint, int3
	SwbpInsnSize  = 1    // UPROBE_SWBP_INSN_SIZE
	MaxUinsnBytes = 16   // MAX_UINSN_BYTES: the copy of the probed instruction
	XOLSlotBytes  = 128  // UPROBE_XOL_SLOT_BYTES: 32 slots in the XOL page
)

// UretprobeTrampoline returns the x86-64 uretprobe trampoline, which the
// kernel copies into slot 0 of the XOL page, and the offset in it of
// uretprobe_syscall_check, the address after its syscall: sys_uretprobe
// refuses (SIGILL) a call whose ip is not there (trampoline_check_ip).
// The code is "push %rax; push %rcx; push %r11; mov $335,%rax; syscall;
// pop %r11; pop %rcx; ret; int3", encoded as GNU as encodes it (mov as
// REX.W C7 /0). Mirrors arch/x86/kernel/uprobes.c:arch_uretprobe_trampoline()
// for a 64-bit task (a compat task gets a bare int3).
func UretprobeTrampoline() (code []byte, syscallCheck int) {
	code = []byte{
		0x50,       // push %rax
		0x51,       // push %rcx
		0x41, 0x53, // push %r11
		0x48, 0xc7, 0xc0, uapi.NrUretprobe & 0xff, uapi.NrUretprobe >> 8, 0, 0, // mov $335,%rax
		0x0f, 0x05, // syscall
		0x41, 0x5b, // pop %r11: uretprobe_syscall_check
		0x59, // pop %rcx
		0xc3, // ret
		0xcc, // int3
	}
	return code, 13
}

// UprobeTrampoline returns the code of the x86-64 optimized-uprobe
// trampoline page ([uprobes-trampoline]), which a probed 5-byte NOP, once
// optimized, calls: "push %rcx; push %r11; push %rax; mov $336,%rax;
// syscall; pop %rax; pop %r11; pop %rcx; ret; int3" (uprobe_trampoline_entry).
func UprobeTrampoline() []byte {
	return []byte{
		0x51,       // push %rcx
		0x41, 0x53, // push %r11
		0x50,                                                             // push %rax
		0x48, 0xc7, 0xc0, uapi.NrUprobe & 0xff, uapi.NrUprobe >> 8, 0, 0, // mov $336,%rax
		0x0f, 0x05, // syscall
		0x58,       // pop %rax
		0x41, 0x5b, // pop %r11
		0x59, // pop %rcx
		0xc3, // ret
		0xcc, // int3
	}
}

// UprobeSlotBytes is the size of one slot of the jmp-slot trampoline page
// (the x86 nop5 optimization with a jmp, proposed on linux-trace-kernel in
// May 2026: "uprobes/x86: use jmp instead of call for the nop5
// optimization"): 256 identical slots fill a page.
const UprobeSlotBytes = 16

// UprobeSlot returns the code of one slot of the jmp-slot trampoline page,
// which an optimized 5-byte NOP jumps to: "lea -128(%rsp),%rsp; push %rcx;
// push %r11; push %rax; mov $336,%eax; syscall", 16 bytes. The lea steps
// over the 128-byte red zone, so nothing of the probed function's stack
// below its %rsp is written; the uprobe syscall never returns here.
func UprobeSlot() []byte {
	code, _ := NewAsm(0).Lea(RSP, -128).Push(RCX).Push(R11).Push(RAX).MovImm32(RAX, uapi.NrUprobe).Syscall().Assemble()
	return code
}
