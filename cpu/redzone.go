package cpu

// The red-zone target: a leaf function that keeps data in the x86-64 red
// zone (the 128 bytes below %rsp that the System V ABI lets a leaf use
// without moving %rsp) across two probe sites, then checks it. The live
// side (package mmlab/live/uprobe) has the same bytes in Go assembly.
const (
	// RedZoneSlots is the number of 8-byte words it keeps, at -8, -16,
	// ..., -8*RedZoneSlots(%rsp).
	RedZoneSlots = 8
	// RedZonePattern is the word at -8(%rsp); the word at -8*(i+1) is
	// RedZonePattern+i. No register holds any of them at the probe sites.
	RedZonePattern = 0x5a17_3e00_c0de_7700
)

// RedZoneTarget returns the code of the red-zone target and the offsets in
// it of its two probe sites, a one-byte nop (never optimized) and a 5-byte
// nop (optimized on x86-64 since v6.18). The function
//
//	movabs $RedZonePattern,%rdx
//	mov %rdx,-8(%rsp); inc %rdx; mov %rdx,-16(%rsp); inc %rdx; ...  (RedZoneSlots words)
//	nop                      # site "nop"
//	nopl 0x0(%rax,%rax,1)    # site "nop5"
//	mov $0,%eax
//	movabs $RedZonePattern,%rdx
//	cmp %rdx,-8(%rsp); je 1f; or $1,%eax; 1: inc %rdx; ...  (bit i: word -8*(i+1) changed)
//	ret
//
// returns in %eax the mask of the words that changed between the stores
// and the checks. It writes %rax, %rdx and the flags, nothing else, and
// moves no stack pointer.
func RedZoneTarget() (code []byte, nopAt, nop5At int) {
	a := NewAsm(0)
	a.MovImm64(RDX, RedZonePattern)
	for i := range RedZoneSlots {
		a.Store(int8(-8*(i+1)), RDX)
		if i < RedZoneSlots-1 {
			a.Inc64(RDX)
		}
	}
	nopAt = len(a.buf)
	a.Nop()
	nop5At = len(a.buf)
	a.Nop5()
	a.MovImm32(RAX, 0).MovImm64(RDX, RedZonePattern)
	for i := range RedZoneSlots {
		skip := "same" + string(rune('0'+i))
		a.CmpMem(int8(-8*(i+1)), RDX).Jz(skip).OrImm32(RAX, 1<<i).Label(skip)
		if i < RedZoneSlots-1 {
			a.Inc64(RDX)
		}
	}
	a.Ret()
	code, err := a.Assemble()
	if err != nil {
		panic("cpu: red-zone target: " + err.Error())
	}
	return code, nopAt, nop5At
}

// RedZoneProgram appends the red-zone target to a at label "redzone", its
// sites at "redzone_nop" and "redzone_nop5", and before it a loop,
// "redzone_loop", that calls it %ecx times (%ecx > 0) and halts with %ebx
// the union of the masks it returned and %esi the number of calls that
// returned a nonzero one (what live/uprobe's redzoneLoop computes in Go
// assembly). The loop writes %rbx, %rsi, %rdi and the flags besides what
// the target writes.
func RedZoneProgram(a *Asm) {
	code, nopAt, nop5At := RedZoneTarget()
	a.Label("redzone_loop").MovImm32(RBX, 0).MovImm32(RSI, 0).MovImm32(RDI, 0)
	a.Label("redzone_call").Call("redzone").Or32(RBX, RAX).Cmp32(RAX, RDI).Jz("redzone_same").Inc32(RSI)
	a.Label("redzone_same").Dec32(RCX).Jnz("redzone_call").Hlt()
	at := len(a.buf)
	a.Label("redzone").Raw(code...)
	a.labels["redzone_nop"] = at + nopAt
	a.labels["redzone_nop5"] = at + nop5At
}
