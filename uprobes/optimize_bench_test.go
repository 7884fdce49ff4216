package uprobes

import (
	"fmt"
	"testing"

	"mmlab/cpu"
	"mmlab/kernel"
)

// hitProg is the trigger bench's producer loop over two targets: "nop;
// ret" and "nop5; ret".
func hitProg(a *cpu.Asm) {
	a.Label("loop1").Call("t1").Dec64(cpu.RCX).Jnz("loop1").Hlt()
	a.Label("loop5").Call("t5").Dec64(cpu.RCX).Jnz("loop5").Hlt()
	a.Label("t1").Nop().Ret()
	a.Label("t5").Nop5().Ret()
}

// BenchmarkUprobeHit is one hit of a uprobe with a counting handler on
// one model CPU (ns/op per call of the probed function): on a nop (int3,
// emulated), on a nop5 optimized into a call to the trampoline or into a
// jmp to a slot, and on the same nop5 with optimization off (int3,
// emulated). Compare
// optimized-nop5 with int3-nop (the live trigger's uprobe-nop5 against
// uprobe-nop) and with int3-nop5 (what the optimization buys):
//
//	go test -run '^$' -bench UprobeHit -count 5 ./uprobes/
func BenchmarkUprobeHit(b *testing.B) {
	for _, c := range []struct {
		name, target, loop string
		opt                Optimize
	}{
		{"int3-nop", "t1", "loop1", OptimizeCall},
		{"optimized-nop5", "t5", "loop5", OptimizeCall},
		{"jmp-slot-nop5", "t5", "loop5", OptimizeJmpSlot},
		{"int3-nop5", "t5", "loop5", OptimizeOff},
	} {
		for _, fl := range flavors {
			b.Run(fmt.Sprintf("%s/%s", c.name, fl), func(b *testing.B) {
				e := newEnv(b, 1, fl, hitProg)
				u, err := New(e.mach, Config{Flavor: fl, Design: kernel.DesignBefore, HitPath: HitPathToday, Optimize: c.opt})
				if err != nil {
					b.Fatal(err)
				}
				e.u = u
				p := e.newProc(b, "bench")
				k := newCounter(true, false, nil)
				mustRegister(b, e, c.target, &k.c)
				wantHalt(b, e.run(b, p, 0, c.loop, calls(1))) // the first hit optimizes
				k.hits = 0
				b.ResetTimer()
				res := e.run(b, p, 0, c.loop, func(r *cpu.Regs) { r.R[cpu.RCX] = uint64(b.N) })
				b.StopTimer()
				wantHalt(b, res)
				if k.hits != b.N {
					b.Fatalf("%d hits for %d calls", k.hits, b.N)
				}
			})
		}
	}
}
