#include "textflag.h"

// Probe targets. Each is a leaf that touches no stack and no register, so a
// uprobe on its first byte, or a uretprobe that swaps its return address,
// never meets a Go stack move: the Go runtime neither preempts nor scans a
// goroutine inside an assembly function. Go's NOP pseudo-instruction emits
// nothing, so the opcodes are spelled out byte by byte.

// uprobeTargetNop: nop; ret (the kernel bench's uprobe_target_nop).
TEXT ·uprobeTargetNop(SB), NOSPLIT|NOFRAME, $0-0
	BYTE $0x90
	RET

// uprobeTargetNop5: nopl 0x0(%rax,%rax,1); ret (uprobe_target_nop5).
TEXT ·uprobeTargetNop5(SB), NOSPLIT|NOFRAME, $0-0
	BYTE $0x0F; BYTE $0x1F; BYTE $0x44; BYTE $0x00; BYTE $0x00
	RET

// uprobeTargetRet: ret (uprobe_target_ret: the probed instruction is a ret,
// which the kernel single-steps out of line or emulates).
TEXT ·uprobeTargetRet(SB), NOSPLIT|NOFRAME, $0-0
	RET

// uprobeSled: 64 one-byte nops and a ret: 64 distinct probe sites in one
// function, for attach and detach cost.
TEXT ·uprobeSled(SB), NOSPLIT|NOFRAME, $0-0
	BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90
	BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90
	BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90
	BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90
	BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90
	BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90
	BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90
	BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90
	RET

// func targetPC(which int) uintptr returns the address of the first byte of
// target which (0 nop, 1 nop5, 2 ret, 3 sled): the ABI0 body itself, not the
// ABIInternal wrapper that a Go func value of it would point to.
TEXT ·targetPC(SB), NOSPLIT, $0-16
	MOVQ which+0(FP), AX
	CMPQ AX, $0
	JEQ  lnop
	CMPQ AX, $1
	JEQ  lnop5
	CMPQ AX, $2
	JEQ  lret
	LEAQ ·uprobeSled(SB), AX
	MOVQ AX, ret+8(FP)
	RET
lnop:
	LEAQ ·uprobeTargetNop(SB), AX
	MOVQ AX, ret+8(FP)
	RET
lnop5:
	LEAQ ·uprobeTargetNop5(SB), AX
	MOVQ AX, ret+8(FP)
	RET
lret:
	LEAQ ·uprobeTargetRet(SB), AX
	MOVQ AX, ret+8(FP)
	RET

// func callLoop(pc uintptr, n uint64) calls the target at pc n times (n > 0),
// the producer loop of the kernel's trigger bench. The targets clobber no
// register, so BX and CX survive the calls.
TEXT ·callLoop(SB), NOSPLIT, $0-16
	MOVQ pc+0(FP), BX
	MOVQ n+8(FP), CX
loop:
	CALL BX
	DECQ CX
	JNZ  loop
	RET
