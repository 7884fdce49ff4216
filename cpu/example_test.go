package cpu_test

import (
	"fmt"

	"mmlab/cpu"
	"mmlab/errno"
)

// page and space are a minimal Memory: pages by virtual page number.
type page [cpu.PageSize]byte

func (p *page) Bytes() []byte { return p[:] }

type space map[uint64]*page

func (s space) Page(addr uint64, _ cpu.Access) (cpu.Page, error) {
	if p, ok := s[addr>>cpu.PageShift]; ok {
		return p, nil
	}
	return nil, errno.SIGSEGV
}

// probes is the uprobe side of the example: the original instructions under
// its breakpoints, and the hit path of arch/x86 (emulate, or single-step out
// of line and fix up).
type probes struct {
	cpu.NoHooks
	c     *cpu.CPU
	mem   space
	orig  map[uint64]cpu.Insn // probed address → original instruction
	hits  map[uint64]int
	xol   uint64 // the XOL slot
	vaddr uint64 // the probe being single-stepped
}

func (p *probes) Int3(r *cpu.Regs) bool {
	bp := r.RIP - 1 // uprobe_get_swbp_addr
	in, ok := p.orig[bp]
	if !ok {
		return false // not ours: SIGTRAP
	}
	p.hits[bp]++ // the handlers
	r.RIP = bp
	if in.Class == cpu.Emulate {
		return p.c.Emulate(&in, r, p.mem) == nil
	}
	// Single-step out of line: the original bytes are in the slot.
	p.vaddr, r.RIP = bp, p.xol
	r.Flags |= cpu.FlagTF
	return true
}

func (p *probes) SingleStep(r *cpu.Regs) bool {
	in := p.orig[p.vaddr]
	if err := in.PostXOL(r, p.vaddr, p.xol); err != nil {
		return false
	}
	r.Flags &^= cpu.FlagTF
	return true
}

// Example runs a loop calling a function with a frame pointer, with uprobes
// on its first instruction (push %rbp, emulated) and on its ret (stepped out
// of line).
func Example() {
	const text, stack, xol = 0x401000, 0x7ffffffde000, 0x7fffffffe000
	a := cpu.NewAsm(text)
	a.MovImm32(cpu.RCX, 3)
	a.Label("loop").Call("f").Dec32(cpu.RCX).Jnz("loop").Hlt()
	a.Label("f").Push(cpu.RBP).Mov(cpu.RBP, cpu.RSP).Pop(cpu.RBP).Label("ret").Ret()
	code, err := a.Assemble()
	if err != nil {
		panic(err)
	}
	mem := space{text >> cpu.PageShift: new(page), stack >> cpu.PageShift: new(page), xol >> cpu.PageShift: new(page)}
	copy(mem[text>>cpu.PageShift][:], code)

	var c cpu.CPU
	p := &probes{c: &c, mem: mem, orig: map[uint64]cpu.Insn{}, hits: map[uint64]int{}, xol: xol + 128}
	for _, label := range []string{"f", "ret"} {
		addr, _ := a.Addr(label)
		off := addr - text
		in, err := cpu.Decode(mem[text>>cpu.PageShift][off:])
		if err != nil {
			panic(err)
		}
		p.orig[addr] = in
		fmt.Printf("probe at %#x: %v (%v)\n", addr, in, in.Class)
		if in.Class == cpu.XOL { // this example has one XOL probe: one slot
			copy(mem[xol>>cpu.PageShift][128:], mem[text>>cpu.PageShift][off:off+uint64(in.Len)])
		}
		mem[text>>cpu.PageShift][off] = 0xcc // the breakpoint
	}

	r := &cpu.Regs{RIP: text, R: [16]uint64{cpu.RSP: stack + cpu.PageSize, cpu.RBP: 0xbbbb}}
	s := c.Run(r, mem, p)
	f, _ := a.Addr("f")
	ret, _ := a.Addr("ret")
	fmt.Printf("%v: rcx=%d rbp=%#x hits %d and %d\n", s, r.R[cpu.RCX], r.R[cpu.RBP], p.hits[f], p.hits[ret])
	// Output:
	// probe at 0x40100f: push rbp (emulate)
	// probe at 0x401014: ret (xol)
	// halt: rcx=0 rbp=0xbbbb hits 3 and 3
}
