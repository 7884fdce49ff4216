package uprobes

import (
	"bytes"
	"fmt"
	"testing"

	"mmlab/cpu"
	"mmlab/kernel"
)

// The red-zone target (cpu.RedZoneTarget) keeps eight words below %rsp
// across its probed nop5, in a loop of 20 calls. With optimization off no
// call finds a word changed; with the call design every call after the
// first (the int3 hit that optimizes the site) finds the four words the
// call and the trampoline pushed (-8: the return address, -16 %rcx, -24
// %r11, -32 %rax) changed, as the live 6.18 kernel does (live/uprobe's
// TestLiveRedZone); with the jmp-slot design none does. In every design
// each call is one hit, the handler sees the site's ip and stack pointer,
// and the loop's registers survive.
func TestRedZone(t *testing.T) {
	t.Parallel()
	const n = 20
	for _, o := range Optimizations.Values() {
		t.Run(o.String(), func(t *testing.T) {
			e := newEnvConfig(t, 1, Config{Flavor: TasksTrace, Design: kernel.DesignBefore, HitPath: HitPathToday, Optimize: o}, cpu.RedZoneProgram)
			p := e.newProc(t, "p")
			const sp = stackTop - 64
			hits, bad := 0, ""
			mustRegister(t, e, "redzone_nop5", &Consumer{Handler: func(r *kernel.Runner) int {
				hits++
				if r.Regs.RIP != e.addr("redzone_nop5") || r.Regs.R[cpu.RSP] != sp-8 {
					bad = fmt.Sprintf("handler at ip %#x sp %#x", r.Regs.RIP, r.Regs.R[cpu.RSP])
				}
				return 0
			}})
			res := e.run(t, p, 0, "redzone_loop", func(r *cpu.Regs) {
				r.R[cpu.RCX], r.R[cpu.R11], r.R[cpu.RBP] = n, 0x1111, 0x2222
			})
			wantHalt(t, res)
			wantMask, wantBad := uint64(0), uint64(0)
			if o == OptimizeCall {
				wantMask, wantBad = 0x0f, n-1
			}
			if got, gotBad := res.regs.R[cpu.RBX], res.regs.R[cpu.RSI]; got != wantMask || gotBad != wantBad {
				t.Errorf("mask %#x in %d calls, want %#x in %d", got, gotBad, wantMask, wantBad)
			}
			if hits != n || bad != "" {
				t.Errorf("%d hits, want %d; %s", hits, n, bad)
			}
			if r := res.regs; r.R[cpu.RSP] != sp || r.R[cpu.R11] != 0x1111 || r.R[cpu.RBP] != 0x2222 || r.R[cpu.RCX] != 0 {
				t.Errorf("registers after the loop: %v r11 %#x", &r, r.R[cpu.R11])
			}
		})
	}
}

// twoSiteProg has two probed nop5 functions; main calls each once.
func twoSiteProg(a *cpu.Asm) {
	a.Label("main").Call("f5").Call("g5").Hlt()
	a.Label("f5").Nop5().Ret()
	a.Label("g5").Nop5().Ret()
}

// Slots are assigned per mm: two sites of one process get slots 0 and 1
// of one page; another process gets its own page and table, slot 0 first;
// a site optimized again after its removal gets its slot back (the model's
// choice: a slot stays its site's). Every slot is the same 16 bytes.
func TestJmpSlotAssignment(t *testing.T) {
	t.Parallel()
	e := newEnvConfig(t, 1, Config{Flavor: TasksTrace, Design: kernel.DesignBefore, HitPath: HitPathToday, Optimize: OptimizeJmpSlot}, twoSiteProg)
	p, q := e.newProc(t, "p"), e.newProc(t, "q")
	kg := newCounter(true, false, nil)
	mustRegister(t, e, "f5", &newCounter(true, false, nil).c)
	upg := mustRegister(t, e, "g5", &kg.c)
	jmp := func(label string, dest uint64) []byte {
		b := branchTo(jmpInsn, e.addr(label), dest)
		return b[:]
	}
	wantHalt(t, e.run(t, q, 0, "g5", func(r *cpu.Regs) { pushHlt(t, q, r) }))
	wantHalt(t, e.run(t, p, 0, "main", nil))
	if got := readBytes(t, p.MM, e.addr("f5"), 5); !bytes.Equal(got, jmp("f5", wantTramp)) {
		t.Errorf("p's f5 % x, want a jmp to slot 0 at %#x", got, wantTramp)
	}
	if got := readBytes(t, p.MM, e.addr("g5"), 5); !bytes.Equal(got, jmp("g5", wantTramp+16)) {
		t.Errorf("p's g5 % x, want a jmp to slot 1", got)
	}
	if got := readBytes(t, q.MM, e.addr("g5"), 5); !bytes.Equal(got, jmp("g5", wantTramp)) {
		t.Errorf("q's g5 % x, want a jmp to its own slot 0", got)
	}
	page := readBytes(t, p.MM, wantTramp, 4096)
	for i := 0; i < 4096; i += cpu.UprobeSlotBytes {
		if !bytes.Equal(page[i:i+cpu.UprobeSlotBytes], cpu.UprobeSlot()) {
			t.Fatalf("slot at %#x: % x", i, page[i:i+16])
		}
	}
	if err := e.u.UnregisterNosync(nil, upg, &kg.c); err != nil {
		t.Fatal(err)
	}
	if got := readBytes(t, p.MM, e.addr("g5"), 5); !bytes.Equal(got, nop5) {
		t.Fatalf("g5 after removal: % x", got)
	}
	k2 := newCounter(true, false, nil)
	mustRegister(t, e, "g5", &k2.c)
	wantHalt(t, e.run(t, p, 0, "main", nil))
	wantHalt(t, e.run(t, p, 0, "main", nil))
	if got := readBytes(t, p.MM, e.addr("g5"), 5); !bytes.Equal(got, jmp("g5", wantTramp+16)) || k2.hits != 2 {
		t.Errorf("g5 optimized again: % x, %d hits; want its slot 1 again, 2 hits", got, k2.hits)
	}
}

// pushHlt makes a run that starts at a function return to a hlt: the
// return address pushed is main's last instruction of twoSiteProg.
func pushHlt(t *testing.T, task *kernel.Task, r *cpu.Regs) {
	t.Helper()
	r.R[cpu.RSP] -= 8
	hlt := uint64(textAddr + 10) // main: call f5 (5), call g5 (5), hlt
	for i := range 8 {
		if err := task.MM.StoreByte(nil, r.R[cpu.RSP]+uint64(i), byte(hlt>>(8*i))); err != nil {
			t.Fatal(err)
		}
	}
}

// A syscall at the end of a slot no site was given kills the task with
// SIGILL (the model's choice: the stack the slot moved cannot be given
// back); the assigned slot next to it works.
func TestJmpSlotUnassigned(t *testing.T) {
	t.Parallel()
	e, p, k, _ := probedProc(t, Config{Flavor: TasksTrace, Design: kernel.DesignBefore, HitPath: HitPathToday, Optimize: OptimizeJmpSlot})
	wantHalt(t, e.run(t, p, 0, "main", calls(2)))
	res := e.run(t, p, 0, "main", func(r *cpu.Regs) { r.RIP = wantTramp + 3*cpu.UprobeSlotBytes })
	if res.stop.Reason == cpu.StopHalt || !slicesHas(res.sigs, sigill) {
		t.Errorf("unassigned slot: %v, signals %v; want SIGILL", res.stop, res.sigs)
	}
	if k.hits != 2 {
		t.Errorf("%d hits, want 2", k.hits)
	}
}
