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

// NOP8: eight one-byte nops.
#define NOP8 BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90; BYTE $0x90

// uprobeSled: 64 one-byte nops and a ret: 64 distinct probe sites in one
// function, for attach and detach cost.
TEXT ·uprobeSled(SB), NOSPLIT|NOFRAME, $0-0
	NOP8; NOP8; NOP8; NOP8; NOP8; NOP8; NOP8; NOP8
	RET

// The red-zone target's instructions, as cpu.RedZoneTarget assembles them.
// MOVABS_RDX_PATTERN: mov rdx,0x5a173e00c0de7700 (cpu.RedZonePattern).
#define MOVABS_RDX_PATTERN BYTE $0x48; BYTE $0xBA; BYTE $0x00; BYTE $0x77; BYTE $0xDE; BYTE $0xC0; BYTE $0x00; BYTE $0x3E; BYTE $0x17; BYTE $0x5A
// INC_RDX: inc rdx.
#define INC_RDX BYTE $0x48; BYTE $0xFF; BYTE $0xC2
// STORE_RDX(disp8): mov [rsp+disp8],rdx.
#define STORE_RDX(disp8) BYTE $0x48; BYTE $0x89; BYTE $0x54; BYTE $0x24; BYTE $disp8
// CMP_RDX(disp8): cmp [rsp+disp8],rdx.
#define CMP_RDX(disp8) BYTE $0x48; BYTE $0x39; BYTE $0x54; BYTE $0x24; BYTE $disp8
// CHECK(disp8, bit): cmp [rsp+disp8],rdx; je .+5; or eax,bit (bit < 0x80).
#define CHECK(disp8, bit) CMP_RDX(disp8); BYTE $0x74; BYTE $0x03; BYTE $0x83; BYTE $0xC8; BYTE $bit

// uprobeRedZone: the red-zone target, the bytes of cpu.RedZoneTarget() (a
// test checks them): a leaf that stores cpu.RedZoneSlots words at -8,
// -16, ... (%rsp), passes a nop and a nop5 (the probe sites), then returns
// in AX the mask of the words that changed. It writes AX, DX and the flags.
TEXT ·uprobeRedZone(SB), NOSPLIT|NOFRAME, $0-0
	MOVABS_RDX_PATTERN
	STORE_RDX(0xF8); INC_RDX; STORE_RDX(0xF0); INC_RDX; STORE_RDX(0xE8); INC_RDX; STORE_RDX(0xE0); INC_RDX
	STORE_RDX(0xD8); INC_RDX; STORE_RDX(0xD0); INC_RDX; STORE_RDX(0xC8); INC_RDX; STORE_RDX(0xC0)
	BYTE $0x90 // nop: site "redzone_nop" (never optimized)
	BYTE $0x0F; BYTE $0x1F; BYTE $0x44; BYTE $0x00; BYTE $0x00 // nopl 0x0(%rax,%rax,1): site "redzone_nop5"
	BYTE $0xB8; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00 // mov eax,0x0
	MOVABS_RDX_PATTERN
	CHECK(0xF8, 0x01); INC_RDX; CHECK(0xF0, 0x02); INC_RDX; CHECK(0xE8, 0x04); INC_RDX; CHECK(0xE0, 0x08); INC_RDX
	CHECK(0xD8, 0x10); INC_RDX; CHECK(0xD0, 0x20); INC_RDX; CHECK(0xC8, 0x40); INC_RDX
	CMP_RDX(0xC0); BYTE $0x74; BYTE $0x06 // je .+8
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

// targetPCs holds the address of the first byte of each target in
// targetSpecs order (0 nop, 1 nop5, 2 ret, 3 sled, 4 redzone): the ABI0 body
// itself, not the ABIInternal wrapper that a Go func value of it would
// point to.
DATA targetPCs<>+0(SB)/8, $·uprobeTargetNop(SB)
DATA targetPCs<>+8(SB)/8, $·uprobeTargetNop5(SB)
DATA targetPCs<>+16(SB)/8, $·uprobeTargetRet(SB)
DATA targetPCs<>+24(SB)/8, $·uprobeSled(SB)
DATA targetPCs<>+32(SB)/8, $·uprobeRedZone(SB)
GLOBL targetPCs<>(SB), RODATA, $40

// func targetPC(which int) uintptr returns targetPCs[which] (0 <= which < 5).
TEXT ·targetPC(SB), NOSPLIT, $0-16
	MOVQ which+0(FP), AX
	LEAQ targetPCs<>(SB), BX
	MOVQ (BX)(AX*8), AX
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
