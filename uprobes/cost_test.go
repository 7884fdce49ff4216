package uprobes

import (
	"testing"
	"time"

	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/sched"
)

// On a simulated machine each hit costs its hit path's counted kernel
// instructions at the machine's kernel_instruction, and a uretprobe's
// return its own count besides: n calls of a probed function take n times
// that longer than on the same machine without the cost.
func TestSimHitChargesKernelInstructions(t *testing.T) {
	free := machine.MustNamed("x86-64")
	free.Costs.KernelInstruction = machine.Cost{NS: 0, Source: "test: " + machine.NotCharged}
	costed := free
	costed.Costs.KernelInstruction = machine.Cost{NS: 2, Source: "test"}
	const n = 10
	took := func(d machine.Description, hp HitPath, ret bool) time.Duration {
		e := newSimEnv(t, d, Config{Flavor: TasksTrace, Design: kernel.DesignBefore, HitPath: hp, Optimize: OptimizeCall}, loopProg)
		p := e.newProc(t, "p")
		k := newCounter(true, ret, nil)
		mustRegister(t, e, "f", &k.c)
		var d0 time.Duration
		err := e.mach.Main("test", func() error {
			start := sched.Now()
			wantHalt(t, e.run(t, p, 0, "main", calls(n)))
			d0 = sched.Since(start)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if k.hits != n || (ret && k.rets != n) {
			t.Fatalf("%d hits, %d returns: want %d", k.hits, k.rets, n)
		}
		return d0
	}
	for _, c := range []struct {
		hp        HitPath
		swbp, ret int
	}{{HitPathV612, swbpInstructionsV612, retInstructionsV612}, {HitPathToday, swbpInstructionsToday, retInstructionsToday}} {
		if got, want := took(costed, c.hp, false)-took(free, c.hp, false), time.Duration(n*c.swbp*2); got != want {
			t.Errorf("%v, uprobe: %d calls took %v more at 2 ns per kernel instruction: want %v", c.hp, n, got, want)
		}
		if got, want := took(costed, c.hp, true)-took(free, c.hp, true), time.Duration(n*(c.swbp+c.ret)*2); got != want {
			t.Errorf("%v, uretprobe: %d calls took %v more at 2 ns per kernel instruction: want %v", c.hp, n, got, want)
		}
	}
}
