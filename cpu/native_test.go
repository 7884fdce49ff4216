package cpu

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// nativeFlags is a C program that runs inc and dec at 32 and 64 bits on this
// machine's CPU, with CF set and clear before, and prints the results and
// RFLAGS; then loads every combination of CF, PF, ZF, SF and OF with popfq
// and prints which of the 16 jcc conditions hold (setcc).
const nativeFlags = `
#include <stdio.h>
#include <stdint.h>

#define OP(insn, setcf) asm volatile(setcf "\n\t" insn "\n\tpushfq\n\tpopq %1" : "+r"(v), "=r"(f) :: "cc")
#define CC(n, cc) do { uint8_t b; asm volatile("pushq %1\n\tpopfq\n\tset" cc " %0" : "=r"(b) : "r"(fl) : "cc"); r |= (unsigned)b << n; } while (0)

int main(void) {
	static const uint64_t vals[] = {0, 1, 2, 0xf, 0x10, 0x7f, 0x80, 0xff, 0x7fffffff, 0x80000000,
		0xffffffff, 0x100000000, 0x7fffffffffffffff, 0x8000000000000000, 0xffffffffffffffff,
		0x123456789abcdef0};
	for (unsigned i = 0; i < sizeof vals / sizeof vals[0]; i++) {
		for (int op = 0; op < 8; op++) {
			uint64_t v = vals[i], f;
			switch (op) {
			case 0: OP("decl %k0", "clc"); break;
			case 1: OP("decl %k0", "stc"); break;
			case 2: OP("incl %k0", "clc"); break;
			case 3: OP("incl %k0", "stc"); break;
			case 4: OP("decq %0", "clc"); break;
			case 5: OP("decq %0", "stc"); break;
			case 6: OP("incq %0", "clc"); break;
			case 7: OP("incq %0", "stc"); break;
			}
			printf("incdec %d %llx %llx %llx\n", op, (unsigned long long)vals[i],
				(unsigned long long)v, (unsigned long long)f);
		}
	}
	for (unsigned m = 0; m < 32; m++) {
		uint64_t fl = 0x202; /* IF and the always-one bit */
		if (m & 1) fl |= 1 << 0;
		if (m & 2) fl |= 1 << 2;
		if (m & 4) fl |= 1 << 6;
		if (m & 8) fl |= 1 << 7;
		if (m & 16) fl |= 1 << 11;
		unsigned r = 0;
		CC(0, "o"); CC(1, "no"); CC(2, "b"); CC(3, "ae"); CC(4, "e"); CC(5, "ne"); CC(6, "be"); CC(7, "a");
		CC(8, "s"); CC(9, "ns"); CC(10, "p"); CC(11, "np"); CC(12, "l"); CC(13, "ge"); CC(14, "le"); CC(15, "g");
		printf("cond %llx %x\n", (unsigned long long)fl, r);
	}
	return 0;
}
`

// buildC compiles the C program src with gcc -O1 into an executable named
// name in a temporary directory and returns its path. It skips the test if
// gcc is not installed.
func buildC(t *testing.T, name, src string) string {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc is not installed")
	}
	dir := t.TempDir()
	srcPath, bin := filepath.Join(dir, name+".c"), filepath.Join(dir, name)
	if err := os.WriteFile(srcPath, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-O1", "-o", bin, srcPath).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return bin
}

// TestAgainstNativeCPU compares inc/dec results and flags and every jcc
// condition with what this machine's x86-64 CPU computes.
func TestAgainstNativeCPU(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("needs an x86-64 Linux machine to compare with")
	}
	out, err := exec.Command(buildC(t, "flags", nativeFlags)).Output()
	if err != nil {
		t.Fatal(err)
	}
	const arith = FlagCF | FlagPF | FlagAF | FlagZF | FlagSF | FlagOF
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var op int
		var v, res, flags, fl uint64
		var bitsSet uint
		if _, err := fmt.Sscanf(sc.Text(), "incdec %d %x %x %x", &op, &v, &res, &flags); err == nil {
			dec, wide, cf := op&2 == 0, op >= 4, op&1 != 0
			in := FlagPF | FlagZF | FlagOF // stale flags that must be replaced
			if cf {
				in |= FlagCF
			}
			gotRes, gotFlags := incDec(dec, wide, v, in)
			if gotRes != res || gotFlags&arith != flags&arith {
				t.Errorf("op %d (dec %v, 64-bit %v, CF %v) on %#x: model %#x flags %#x, CPU %#x flags %#x",
					op, dec, wide, cf, v, gotRes, gotFlags&arith, res, flags&arith)
			}
			n++
		} else if _, err := fmt.Sscanf(sc.Text(), "cond %x %x", &fl, &bitsSet); err == nil {
			for c := range uint8(16) {
				if want := bitsSet>>c&1 != 0; cond(c, fl) != want {
					t.Errorf("j%s with flags %#x: model %v, CPU %v", ccNames[c], fl, !want, want)
				}
			}
			n++
		} else {
			t.Fatalf("unexpected line %q", sc.Text())
		}
	}
	if n != 16*8+32 {
		t.Errorf("%d results, want %d", n, 16*8+32)
	}
}
