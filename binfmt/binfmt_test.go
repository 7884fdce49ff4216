package binfmt_test

import (
	"fmt"
	"testing"

	"mmlab/binfmt"
	"mmlab/cpu"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/uprobes"
)

// newKernel returns a kernel of cpus CPUs, stopped at the test's end, and
// a program that calls a 1-byte nop RCX times from "loop" and halts.
func newKernel(t *testing.T, cpus int) (*binfmt.Kernel, *binfmt.Program) {
	t.Helper()
	k, err := binfmt.NewKernel(machine.MustNamed("x86-64"), cpus, nil, uprobes.Variants[0].Config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	p, err := binfmt.NewProgram(&k.Machine.NS.MM, "/usr/bin/loop", func(a *cpu.Asm) {
		a.Label("loop").Call("target").Dec32(cpu.RCX).Jnz("loop").Hlt()
		a.Label("target").Nop().Ret()
	})
	if err != nil {
		t.Fatal(err)
	}
	return k, p
}

// A loaded process of three threads has two VMAs: the whole file r-xp at
// Text from offset 0, and the three threads' stacks rw-p, anonymous,
// ending at the stacks' top.
func TestExecLayout(t *testing.T) {
	k, p := newKernel(t, 1)
	task, err := k.Process("loop", p, 3)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range task.MM.VMAs() {
		got = append(got, fmt.Sprintf("%#x-%#x %v pgoff %d file %t", v.Start, v.End, v.Flags, v.Pgoff, v.File != nil))
	}
	stack := uint64(3 * binfmt.StackPages * 4096)
	want := []string{
		fmt.Sprintf("%#x-%#x r-xp pgoff 0 file true", binfmt.Text, binfmt.Text+4096),
		fmt.Sprintf("%#x-%#x rw-p pgoff %d file false", binfmt.StackTop-stack, binfmt.StackTop, (binfmt.StackTop-stack)>>12),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("VMAs\n%v\nwant\n%v", got, want)
	}
	if n := uint64(len(p.Code)); p.File.Size != n || p.Offset("target") >= n {
		t.Errorf("file of %d bytes, code %d, target at offset %d", p.File.Size, n, p.Offset("target"))
	}
}

// A second thread of a model process runs a loop on its own stack through
// a probed nop: it halts, and the counter saw every call.
func TestProcessLoop(t *testing.T) {
	k, p := newKernel(t, 2)
	leader, err := k.Process("loop", p, 2)
	if err != nil {
		t.Fatal(err)
	}
	c := binfmt.NewCounter()
	if _, err := k.Probe(p, "target", &c.Consumer); err != nil {
		t.Fatal(err)
	}
	var stop cpu.Stop
	var sp uint64
	r := k.Machine.Start(leader.NewThread(), 1, 0, func(r *kernel.Runner) {
		stop = binfmt.Loop(r, 1, p.Addr("loop"), 100)
		sp = r.Regs.R[cpu.RSP]
	})
	<-r.Done()
	if stop.Reason != cpu.StopHalt || c.Hits() != 100 {
		t.Fatalf("%v, %d hits for 100 calls", stop, c.Hits())
	}
	if top := uint64(binfmt.StackTop - binfmt.StackPages*4096); sp != top-64 {
		t.Errorf("thread 1 halted with %%rsp %#x, want %#x (64 bytes below its stack's top)", sp, top-64)
	}
}
