package cpu

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// gnuAs assembles AT&T source with GNU as and returns the bytes of .text.
func gnuAs(t *testing.T, src string) []byte {
	t.Helper()
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("needs GNU as for x86-64 (Linux on amd64)")
	}
	as, err1 := exec.LookPath("as")
	objcopy, err2 := exec.LookPath("objcopy")
	if err1 != nil || err2 != nil {
		t.Skip("GNU as and objcopy (binutils) are not installed")
	}
	dir := t.TempDir()
	s, o, bin := filepath.Join(dir, "a.s"), filepath.Join(dir, "a.o"), filepath.Join(dir, "a.bin")
	if err := os.WriteFile(s, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{as, "--64", "-o", o, s}, {objcopy, "-O", "binary", "-j", ".text", o, bin}} {
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", cmd, err, out)
		}
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAgainstGNUAs: the assembler's encodings and the trampolines' bytes are
// what GNU as produces for the same source (the kernel's trampolines are
// inline asm assembled by it).
func TestAgainstGNUAs(t *testing.T) {
	t.Parallel()
	a := NewAsm(0)
	a.MovImm32(RCX, 1000)
	a.Label("loop").Call("f").Dec32(RCX).Jnz("loop").Loop("loop").Jmp("loop").JmpShort("loop").Hlt()
	a.Label("f").Nop().Nop5().Push(RBP).Mov(RBP, RSP).Pop(RBP).Push(R13).Pop(R15).Inc32(R8).Dec64(RAX)
	a.MovImm64(R9, 0x1122334455667788).Jcc32(0xc, "f").Jz("f").Syscall().Int3().Ret()
	ours, err := a.Assemble()
	if err != nil {
		t.Fatal(err)
	}
	theirs := gnuAs(t, `
	mov $1000, %ecx
loop:	call f
	dec %ecx
	jnz loop
	loop loop
	jmp.d32 loop
	jmp.d8 loop
	hlt
f:	nop
	{disp8} nopl 0x0(%rax,%rax,1)
	push %rbp
	mov %rsp, %rbp
	pop %rbp
	push %r13
	pop %r15
	inc %r8d
	dec %rax
	movabs $0x1122334455667788, %r9
	jl.d32 f
	jz f
	syscall
	int3
	ret
`)
	if !bytes.Equal(ours, theirs) {
		t.Errorf("Asm:\n% x\nGNU as:\n% x", ours, theirs)
	}

	uret, _ := UretprobeTrampoline()
	if want := gnuAs(t, `
	push %rax
	push %rcx
	push %r11
	mov $335, %rax
	syscall
	pop %r11
	pop %rcx
	ret
	int3
`); !bytes.Equal(uret, want) {
		t.Errorf("uretprobe trampoline\n% x\nGNU as:\n% x", uret, want)
	}
	if want := gnuAs(t, `
	push %rcx
	push %r11
	push %rax
	mov $336, %rax
	syscall
	pop %rax
	pop %r11
	pop %rcx
	ret
	int3
`); !bytes.Equal(UprobeTrampoline(), want) {
		t.Errorf("uprobe trampoline\n% x\nGNU as:\n% x", UprobeTrampoline(), want)
	}
}
