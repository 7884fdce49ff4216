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

// uprobeRedZone: the red-zone target, the bytes of cpu.RedZoneTarget() (a
// test checks them): a leaf that stores cpu.RedZoneSlots words at -8,
// -16, ... (%rsp), passes a nop and a nop5 (the probe sites), then returns
// in AX the mask of the words that changed. It writes AX, DX and the flags.
TEXT ·uprobeRedZone(SB), NOSPLIT|NOFRAME, $0-0
	BYTE $0x48; BYTE $0xBA; BYTE $0x00; BYTE $0x77; BYTE $0xDE; BYTE $0xC0; BYTE $0x00; BYTE $0x3E; BYTE $0x17; BYTE $0x5A // mov rdx,0x5a173e00c0de7700
	BYTE $0x48; BYTE $0x89; BYTE $0x54; BYTE $0x24; BYTE $0xF8 // mov [rsp-8],rdx
	BYTE $0x48; BYTE $0xFF; BYTE $0xC2 // inc rdx
	BYTE $0x48; BYTE $0x89; BYTE $0x54; BYTE $0x24; BYTE $0xF0 // mov [rsp-16],rdx
	BYTE $0x48; BYTE $0xFF; BYTE $0xC2 // inc rdx
	BYTE $0x48; BYTE $0x89; BYTE $0x54; BYTE $0x24; BYTE $0xE8 // mov [rsp-24],rdx
	BYTE $0x48; BYTE $0xFF; BYTE $0xC2 // inc rdx
	BYTE $0x48; BYTE $0x89; BYTE $0x54; BYTE $0x24; BYTE $0xE0 // mov [rsp-32],rdx
	BYTE $0x48; BYTE $0xFF; BYTE $0xC2 // inc rdx
	BYTE $0x48; BYTE $0x89; BYTE $0x54; BYTE $0x24; BYTE $0xD8 // mov [rsp-40],rdx
	BYTE $0x48; BYTE $0xFF; BYTE $0xC2 // inc rdx
	BYTE $0x48; BYTE $0x89; BYTE $0x54; BYTE $0x24; BYTE $0xD0 // mov [rsp-48],rdx
	BYTE $0x48; BYTE $0xFF; BYTE $0xC2 // inc rdx
	BYTE $0x48; BYTE $0x89; BYTE $0x54; BYTE $0x24; BYTE $0xC8 // mov [rsp-56],rdx
	BYTE $0x48; BYTE $0xFF; BYTE $0xC2 // inc rdx
	BYTE $0x48; BYTE $0x89; BYTE $0x54; BYTE $0x24; BYTE $0xC0 // mov [rsp-64],rdx
	BYTE $0x90 // nop: site "redzone_nop" (never optimized)
	BYTE $0x0F; BYTE $0x1F; BYTE $0x44; BYTE $0x00; BYTE $0x00 // nopl 0x0(%rax,%rax,1): site "redzone_nop5"
	BYTE $0xB8; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00 // mov eax,0x0
	BYTE $0x48; BYTE $0xBA; BYTE $0x00; BYTE $0x77; BYTE $0xDE; BYTE $0xC0; BYTE $0x00; BYTE $0x3E; BYTE $0x17; BYTE $0x5A // mov rdx,0x5a173e00c0de7700
	BYTE $0x48; BYTE $0x39; BYTE $0x54; BYTE $0x24; BYTE $0xF8 // cmp [rsp-8],rdx
	BYTE $0x74; BYTE $0x03 // je .+5
	BYTE $0x83; BYTE $0xC8; BYTE $0x01 // or eax,0x1
	BYTE $0x48; BYTE $0xFF; BYTE $0xC2 // inc rdx
	BYTE $0x48; BYTE $0x39; BYTE $0x54; BYTE $0x24; BYTE $0xF0 // cmp [rsp-16],rdx
	BYTE $0x74; BYTE $0x03 // je .+5
	BYTE $0x83; BYTE $0xC8; BYTE $0x02 // or eax,0x2
	BYTE $0x48; BYTE $0xFF; BYTE $0xC2 // inc rdx
	BYTE $0x48; BYTE $0x39; BYTE $0x54; BYTE $0x24; BYTE $0xE8 // cmp [rsp-24],rdx
	BYTE $0x74; BYTE $0x03 // je .+5
	BYTE $0x83; BYTE $0xC8; BYTE $0x04 // or eax,0x4
	BYTE $0x48; BYTE $0xFF; BYTE $0xC2 // inc rdx
	BYTE $0x48; BYTE $0x39; BYTE $0x54; BYTE $0x24; BYTE $0xE0 // cmp [rsp-32],rdx
	BYTE $0x74; BYTE $0x03 // je .+5
	BYTE $0x83; BYTE $0xC8; BYTE $0x08 // or eax,0x8
	BYTE $0x48; BYTE $0xFF; BYTE $0xC2 // inc rdx
	BYTE $0x48; BYTE $0x39; BYTE $0x54; BYTE $0x24; BYTE $0xD8 // cmp [rsp-40],rdx
	BYTE $0x74; BYTE $0x03 // je .+5
	BYTE $0x83; BYTE $0xC8; BYTE $0x10 // or eax,0x10
	BYTE $0x48; BYTE $0xFF; BYTE $0xC2 // inc rdx
	BYTE $0x48; BYTE $0x39; BYTE $0x54; BYTE $0x24; BYTE $0xD0 // cmp [rsp-48],rdx
	BYTE $0x74; BYTE $0x03 // je .+5
	BYTE $0x83; BYTE $0xC8; BYTE $0x20 // or eax,0x20
	BYTE $0x48; BYTE $0xFF; BYTE $0xC2 // inc rdx
	BYTE $0x48; BYTE $0x39; BYTE $0x54; BYTE $0x24; BYTE $0xC8 // cmp [rsp-56],rdx
	BYTE $0x74; BYTE $0x03 // je .+5
	BYTE $0x83; BYTE $0xC8; BYTE $0x40 // or eax,0x40
	BYTE $0x48; BYTE $0xFF; BYTE $0xC2 // inc rdx
	BYTE $0x48; BYTE $0x39; BYTE $0x54; BYTE $0x24; BYTE $0xC0 // cmp [rsp-64],rdx
	BYTE $0x74; BYTE $0x06 // je .+8
	BYTE $0x81; BYTE $0xC8; BYTE $0x80; BYTE $0x00; BYTE $0x00; BYTE $0x00 // or eax,0x80
	BYTE $0xC3 // ret
	RET

// func redzoneLoop(pc uintptr, n uint64) (corrupted, mask uint64) calls the
// red-zone target at pc n times (n > 0): corrupted counts the calls that
// found a word changed, mask is the union of their masks (what
// cpu.RedZoneProgram's loop computes on the model).
TEXT ·redzoneLoop(SB), NOSPLIT, $0-32
	MOVQ pc+0(FP), BX
	MOVQ n+8(FP), CX
	XORQ SI, SI
	XORQ DI, DI
rzloop:
	CALL BX
	ORQ  AX, DI
	TESTQ AX, AX
	JZ   rzsame
	INCQ SI
rzsame:
	DECQ CX
	JNZ  rzloop
	MOVQ SI, corrupted+16(FP)
	MOVQ DI, mask+24(FP)
	RET

// func targetPC(which int) uintptr returns the address of the first byte of
// target which (0 nop, 1 nop5, 2 ret, 3 sled, 4 redzone): the ABI0 body
// itself, not the ABIInternal wrapper that a Go func value of it would
// point to.
TEXT ·targetPC(SB), NOSPLIT, $0-16
	MOVQ which+0(FP), AX
	CMPQ AX, $0
	JEQ  lnop
	CMPQ AX, $1
	JEQ  lnop5
	CMPQ AX, $2
	JEQ  lret
	CMPQ AX, $4
	JEQ  lredzone
	LEAQ ·uprobeSled(SB), AX
	MOVQ AX, ret+8(FP)
	RET
lredzone:
	LEAQ ·uprobeRedZone(SB), AX
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
