package experiment

import (
	"testing"

	"mmlab/cpu"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/uprobes"
)

// A second thread of a model process runs a loop on its own stack through
// a probed nop: it halts, and the counter saw every call.
func TestModelProcessLoop(t *testing.T) {
	k, err := NewModelKernel(machine.MustNamed("x86-64"), 2, uprobes.Variants[0].Config)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Stop()
	p, err := NewModelProgram(&k.Machine.NS.MM, "/usr/bin/loop", func(a *cpu.Asm) {
		a.Label("loop").Call("target").Dec32(cpu.RCX).Jnz("loop").Hlt()
		a.Label("target").Nop().Ret()
	})
	if err != nil {
		t.Fatal(err)
	}
	leader, err := k.Process("loop", p, 2)
	if err != nil {
		t.Fatal(err)
	}
	c := NewCounter()
	if _, err := k.Probe(p, "target", &c.Consumer); err != nil {
		t.Fatal(err)
	}
	var stop cpu.Stop
	var sp uint64
	r := k.Machine.Start(leader.NewThread(), 1, 0, func(r *kernel.Runner) {
		stop = Loop(r, 1, p.Addr("loop"), 100)
		sp = r.Regs.R[cpu.RSP]
	})
	<-r.Done()
	if stop.Reason != cpu.StopHalt || c.Hits() != 100 {
		t.Fatalf("%v, %d hits for 100 calls", stop, c.Hits())
	}
	if top := uint64(modelStackTop - modelStackPages*4096); sp != top-64 {
		t.Errorf("thread 1 halted with %%rsp %#x, want %#x (64 bytes below its stack's top)", sp, top-64)
	}
}
