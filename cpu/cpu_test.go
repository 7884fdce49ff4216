package cpu

import (
	"errors"
	"testing"

	"mmlab/errno"
)

// hooks is a scriptable Hooks.
type hooks struct {
	polls      int
	poll       func(n int) bool // called with the poll count (from 1)
	int3       func(r *Regs) bool
	syscall    func(r *Regs) bool
	singleStep func(r *Regs) bool
	fault      func(r *Regs, f Fault) bool
	faults     []Fault
}

func (h *hooks) Poll() bool {
	h.polls++
	return h.poll != nil && h.poll(h.polls)
}

func (h *hooks) Int3(r *Regs) bool { return h.int3 != nil && h.int3(r) }

func (h *hooks) Syscall(r *Regs) bool { return h.syscall != nil && h.syscall(r) }

func (h *hooks) SingleStep(r *Regs) bool { return h.singleStep != nil && h.singleStep(r) }

func (h *hooks) Fault(r *Regs, f Fault) bool {
	h.faults = append(h.faults, f)
	return h.fault != nil && h.fault(r, f)
}

// TestInstructions checks each instruction's effect on registers and memory,
// one Step at a time. Expected values follow from the Intel SDM's definition
// of each instruction (noted where not obvious).
func TestInstructions(t *testing.T) {
	t.Parallel()
	const sp = stackTop - 0x100
	tests := []struct {
		name  string
		code  []byte
		setup func(r *Regs, m *fakeMem)
		want  func(r *Regs) // the expected registers, from a copy of the initial ones
		mem   func(m *fakeMem) bool
		stop  Reason
	}{
		{name: "nop", code: []byte{0x90}, want: func(r *Regs) { r.RIP += 1 }},
		{name: "nop5", code: []byte{0x0f, 0x1f, 0x44, 0, 0}, want: func(r *Regs) { r.RIP += 5 }},
		{name: "push rbp", code: []byte{0x55},
			setup: func(r *Regs, m *fakeMem) { r.R[RBP] = 0x1122334455667788 },
			want:  func(r *Regs) { r.RIP++; r.R[RSP] -= 8 },
			mem:   func(m *fakeMem) bool { return m.read64(sp-8) == 0x1122334455667788 }},
		{name: "push rsp pushes the old value", code: []byte{0x54},
			want: func(r *Regs) { r.RIP++; r.R[RSP] -= 8 },
			mem:  func(m *fakeMem) bool { return m.read64(sp-8) == sp }},
		{name: "pop rbp", code: []byte{0x5d},
			setup: func(r *Regs, m *fakeMem) { m.write64(sp, 0xdeadbeef) },
			want:  func(r *Regs) { r.RIP++; r.R[RSP] += 8; r.R[RBP] = 0xdeadbeef }},
		{name: "pop rsp loads the value", code: []byte{0x5c},
			setup: func(r *Regs, m *fakeMem) { m.write64(sp, 0x1234) },
			want:  func(r *Regs) { r.RIP++; r.R[RSP] = 0x1234 }},
		{name: "mov rbp,rsp", code: []byte{0x48, 0x89, 0xe5},
			want: func(r *Regs) { r.RIP += 3; r.R[RBP] = sp }},
		{name: "mov ebp,esp zero-extends", code: []byte{0x89, 0xe5},
			setup: func(r *Regs, m *fakeMem) { r.R[RBP] = ^uint64(0) },
			want:  func(r *Regs) { r.RIP += 2; r.R[RBP] = sp & 0xffffffff }},
		{name: "mov ecx,imm32 zero-extends", code: []byte{0xb9, 0x78, 0x56, 0x34, 0x12},
			setup: func(r *Regs, m *fakeMem) { r.R[RCX] = ^uint64(0) },
			want:  func(r *Regs) { r.RIP += 5; r.R[RCX] = 0x12345678 }},
		{name: "movabs r11", code: []byte{0x49, 0xbb, 8, 7, 6, 5, 4, 3, 2, 0x81},
			want: func(r *Regs) { r.RIP += 10; r.R[R11] = 0x8102030405060708 }},
		{name: "mov $-1,%rax sign-extends", code: []byte{0x48, 0xc7, 0xc0, 0xff, 0xff, 0xff, 0xff},
			want: func(r *Regs) { r.RIP += 7; r.R[RAX] = ^uint64(0) }},
		{name: "mov $imm32,%ecx (c7) zero-extends", code: []byte{0xc7, 0xc1, 1, 0, 0, 0x80},
			setup: func(r *Regs, m *fakeMem) { r.R[RCX] = ^uint64(0) },
			want:  func(r *Regs) { r.RIP += 6; r.R[RCX] = 0x80000001 }},
		{name: "call rel32", code: []byte{0xe8, 0x10, 0, 0, 0},
			want: func(r *Regs) { r.RIP = textBase + 5 + 0x10; r.R[RSP] -= 8 },
			mem:  func(m *fakeMem) bool { return m.read64(sp-8) == textBase+5 }},
		{name: "call backwards", code: []byte{0xe8, 0xfb, 0xff, 0xff, 0xff},
			want: func(r *Regs) { r.R[RSP] -= 8 }, // call to itself
			mem:  func(m *fakeMem) bool { return m.read64(sp-8) == textBase+5 }},
		{name: "ret", code: []byte{0xc3},
			setup: func(r *Regs, m *fakeMem) { m.write64(sp, 0x402345) },
			want:  func(r *Regs) { r.RIP = 0x402345; r.R[RSP] += 8 }},
		{name: "jmp rel32", code: []byte{0xe9, 0x00, 0x01, 0, 0}, want: func(r *Regs) { r.RIP += 5 + 0x100 }},
		{name: "jmp rel8 back", code: []byte{0xeb, 0xfe}, want: func(r *Regs) {}},
		{name: "jnz taken", code: []byte{0x75, 0x10}, want: func(r *Regs) { r.RIP += 2 + 0x10 }},
		{name: "jnz not taken", code: []byte{0x75, 0x10},
			setup: func(r *Regs, m *fakeMem) { r.Flags |= FlagZF },
			want:  func(r *Regs) { r.RIP += 2 }},
		{name: "jl taken (SF != OF)", code: []byte{0x0f, 0x8c, 0x00, 0x02, 0, 0},
			setup: func(r *Regs, m *fakeMem) { r.Flags |= FlagSF },
			want:  func(r *Regs) { r.RIP += 6 + 0x200 }},
		{name: "jbe taken on CF", code: []byte{0x76, 0x04},
			setup: func(r *Regs, m *fakeMem) { r.Flags |= FlagCF },
			want:  func(r *Regs) { r.RIP += 2 + 4 }},
		{name: "dec ecx to zero clears the upper half", code: []byte{0xff, 0xc9},
			setup: func(r *Regs, m *fakeMem) { r.R[RCX] = 0xffffffff00000001; r.Flags = FlagCF },
			// 0: ZF; low byte 0 has even parity: PF; 1&0xf != 0: no AF; CF kept.
			want: func(r *Regs) { r.RIP += 2; r.R[RCX] = 0; r.Flags = FlagCF | FlagZF | FlagPF }},
		{name: "dec ecx from zero", code: []byte{0xff, 0xc9},
			// 0xffffffff: SF; low byte 0xff has 8 ones: PF; borrow from bit 4: AF.
			want: func(r *Regs) { r.RIP += 2; r.R[RCX] = 0xffffffff; r.Flags = FlagSF | FlagPF | FlagAF }},
		{name: "dec ecx overflows", code: []byte{0xff, 0xc9},
			setup: func(r *Regs, m *fakeMem) { r.R[RCX] = 0x80000000 },
			// 0x7fffffff: OF (min int32 - 1); low byte 0xff: PF; AF (borrow).
			want: func(r *Regs) { r.RIP += 2; r.R[RCX] = 0x7fffffff; r.Flags = FlagOF | FlagPF | FlagAF }},
		{name: "dec rcx 64-bit", code: []byte{0x48, 0xff, 0xc9},
			setup: func(r *Regs, m *fakeMem) { r.R[RCX] = 1 << 32 },
			// 0xffffffff: not negative at 64 bits; low byte 0xff: PF; AF.
			want: func(r *Regs) { r.RIP += 3; r.R[RCX] = 0xffffffff; r.Flags = FlagPF | FlagAF }},
		{name: "inc eax", code: []byte{0xff, 0xc0},
			setup: func(r *Regs, m *fakeMem) { r.R[RAX] = 0x7fffffff },
			// 0x80000000: SF, OF; low byte 0: PF; carry out of bit 3: AF.
			want: func(r *Regs) { r.RIP += 2; r.R[RAX] = 0x80000000; r.Flags = FlagSF | FlagOF | FlagPF | FlagAF }},
		{name: "loop taken, flags untouched", code: []byte{0xe2, 0x08},
			setup: func(r *Regs, m *fakeMem) { r.R[RCX] = 2; r.Flags = FlagZF },
			want:  func(r *Regs) { r.RIP += 2 + 8; r.R[RCX] = 1 }},
		{name: "loop falls through at zero", code: []byte{0xe2, 0x08},
			setup: func(r *Regs, m *fakeMem) { r.R[RCX] = 1 },
			want:  func(r *Regs) { r.RIP += 2; r.R[RCX] = 0 }},
		{name: "loop is 64-bit", code: []byte{0xe2, 0x08},
			setup: func(r *Regs, m *fakeMem) { r.R[RCX] = 1 << 32 },
			want:  func(r *Regs) { r.RIP += 2 + 8; r.R[RCX] = 1<<32 - 1 }},
		{name: "int3 traps with rip after it", code: []byte{0xcc},
			want: func(r *Regs) { r.RIP++ }, stop: StopInt3},
		{name: "hlt", code: []byte{0xf4}, want: func(r *Regs) { r.RIP++ }, stop: StopHalt},
		{name: "ud2 faults with nothing changed", code: []byte{0x0f, 0x0b}, want: func(r *Regs) {}, stop: StopFault},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, r := newTask(t, tt.code)
			r.R[RSP] = sp
			if tt.setup != nil {
				tt.setup(r, m)
			}
			want := *r
			tt.want(&want)
			var c CPU
			s := c.Step(r, m, NoHooks{})
			wantStop := tt.stop
			if wantStop == 0 {
				wantStop = Stepped
			}
			if s.Reason != wantStop {
				t.Fatalf("Step = %v, want %v", s, wantStop)
			}
			if *r != want {
				t.Errorf("regs\n got %v\nwant %v", r, &want)
				t.Errorf("full\n got %+v\nwant %+v", *r, want)
			}
			if tt.mem != nil && !tt.mem(m) {
				t.Errorf("memory not as expected: stack % x", m.peek(sp-8, 16))
			}
		})
	}
}

// callNopLoop is the trigger benchmark's producer: call a function that is
// one nop and ret, n times, counting down %ecx; then halt.
func callNopLoop(t testing.TB, n uint32) []byte {
	return asm(t, func(a *Asm) {
		a.MovImm32(RCX, n)
		a.Label("loop").Call("f").Dec32(RCX).Jnz("loop").Hlt()
		a.Label("f").Nop().Ret()
	})
}

func TestRunCallNopLoop(t *testing.T) {
	t.Parallel()
	const n = 1000
	code := callNopLoop(t, n)
	m, r := newTask(t, code)
	h := &hooks{}
	var c CPU
	s := c.Run(r, m, h)
	if s.Reason != StopHalt {
		t.Fatalf("Run = %v, want halt", s)
	}
	// mov; n × (call, nop, ret, dec, jnz); hlt: Poll before each.
	if want := 1 + 5*n + 1; h.polls != want {
		t.Errorf("Poll called %d times, want %d (once per instruction)", h.polls, want)
	}
	hlt := uint64(textBase + 5 + 5 + 2 + 2)
	if r.RIP != hlt+1 || r.R[RCX] != 0 || r.R[RSP] != stackTop || r.Flags&FlagZF == 0 {
		t.Errorf("end state %v; want rip %#x, rcx 0, rsp %#x, ZF", r, hlt+1, uint64(stackTop))
	}
	// The return address was written into the task's stack.
	if got := m.read64(stackTop - 8); got != textBase+10 {
		t.Errorf("stack slot holds %#x, want the return address %#x", got, textBase+10)
	}
	// Translations are cached: one exec and one write lookup for the
	// whole run (the reads hit the write translation).
	if m.calls != [3]int{Exec: 1, Read: 0, Write: 1} {
		t.Errorf("Memory.Page calls by access %v, want exec 1, read 0, write 1", m.calls)
	}
}

func TestPollStops(t *testing.T) {
	t.Parallel()
	m, r := newTask(t, asm(t, func(a *Asm) { a.Label("l").Nop().JmpShort("l") }))
	h := &hooks{poll: func(n int) bool { return n == 7 }}
	var c CPU
	if s := c.Run(r, m, h); s.Reason != StopPoll {
		t.Fatalf("Run = %v, want poll", s)
	}
	// Six instructions ran: nop, jmp, nop, jmp, nop, jmp; the next is the nop.
	if r.RIP != textBase || h.polls != 7 {
		t.Errorf("stopped at %#x after %d polls, want %#x after 7", r.RIP, h.polls, textBase)
	}
}

// TestInt3Hook runs a breakpoint the way the uprobe hit path handles it: the
// hook sees RIP after the 0xCC, rewinds it, and emulates the original
// instruction (a nop) at the probed address.
func TestInt3Hook(t *testing.T) {
	t.Parallel()
	code := callNopLoop(t, 10)
	f := uint64(textBase + len(code) - 2) // f: nop; ret
	m, r := newTask(t, code)
	m.poke(f, []byte{0xcc})
	hits := 0
	var c CPU
	h := &hooks{int3: func(r *Regs) bool {
		if r.RIP != f+1 {
			t.Fatalf("int3 trapped with rip %#x, want %#x", r.RIP, f+1)
		}
		hits++
		r.RIP--
		in, err := Decode([]byte{0x90}) // the original instruction
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Emulate(&in, r, m); err != nil {
			t.Fatal(err)
		}
		return true
	}}
	if s := c.Run(r, m, h); s.Reason != StopHalt {
		t.Fatalf("Run = %v", s)
	}
	if hits != 10 || r.R[RCX] != 0 {
		t.Errorf("hits %d, rcx %d; want 10, 0", hits, r.R[RCX])
	}
	// Without a hook that resumes, the trap ends Run with RIP after it.
	m2, r2 := newTask(t, code)
	m2.poke(f, []byte{0xcc})
	if s := new(CPU).Run(r2, m2, NoHooks{}); s.Reason != StopInt3 || r2.RIP != f+1 {
		t.Errorf("Run = %v at %#x, want int3 at %#x", s, r2.RIP, f+1)
	}
}

// TestFlushMakesBreakpointVisible installs a breakpoint the way uprobes does,
// by copy-on-write: the text page is replaced by a copy holding 0xCC. The
// CPU keeps executing the page it has cached until it is flushed (the TLB
// shootdown IPI); the first fetch of the probed address after Flush traps.
func TestFlushMakesBreakpointVisible(t *testing.T) {
	t.Parallel()
	code := asm(t, func(a *Asm) { a.Label("l").Nop().JmpShort("l") })
	m, r := newTask(t, code)
	var c CPU
	trapPoll := 0
	h := &hooks{
		poll: func(n int) bool {
			switch n {
			case 10: // install: a new page with the breakpoint
				np := *m.pages[textBase>>PageShift]
				np.b[0] = 0xcc
				m.pages[textBase>>PageShift] = &np
			case 110: // the IPI: flush before instruction 110 (a jmp)
				c.Flush()
			case 200:
				return true
			}
			return false
		},
	}
	h.int3 = func(r *Regs) bool { trapPoll = h.polls; return false }
	s := c.Run(r, m, h)
	if s.Reason != StopInt3 {
		t.Fatalf("Run = %v, want int3", s)
	}
	// Instructions alternate nop (odd) and jmp (even). 100 instructions ran
	// on the stale translation without trapping; the jmp at 110 is fetched
	// from the new page, and the nop at 111 is the breakpoint.
	if trapPoll != 111 || r.RIP != textBase+1 {
		t.Errorf("trapped at instruction %d with rip %#x, want 111 and %#x", trapPoll, r.RIP, textBase+1)
	}
}

// TestWriteIntoCachedPageSeen: the CPU caches translations, not bytes, so a
// byte written into the page it is executing is fetched at once.
func TestWriteIntoCachedPageSeen(t *testing.T) {
	t.Parallel()
	code := asm(t, func(a *Asm) { a.Label("l").Nop().JmpShort("l") })
	m, r := newTask(t, code)
	h := &hooks{poll: func(n int) bool {
		if n == 5 {
			m.poke(textBase, []byte{0xcc})
		}
		return n > 100 // a bound, so that a CPU that misses the write fails rather than spins
	}}
	trap := 0
	h.int3 = func(*Regs) bool { trap = h.polls; return false }
	if s := new(CPU).Run(r, m, h); s.Reason != StopInt3 || trap != 5 {
		t.Errorf("Run = %v at instruction %d, want int3 at 5", s, trap)
	}
}

// TestStackThroughMemory: pushes and pops go through Memory with the
// access they need, break copy-on-write, and use the copy afterwards.
func TestStackThroughMemory(t *testing.T) {
	t.Parallel()
	code := asm(t, func(a *Asm) { a.Push(RBP).Push(RAX).Pop(RCX).Pop(RDX).Hlt() })
	m, r := newTask(t, code)
	top := uint64(stackTop - PageSize)
	orig := m.pages[top>>PageShift]
	m.write64(stackTop-8, 0x5555) // an older value in the stack page
	m.cow[top>>PageShift] = true
	r.R[RSP] = stackTop
	r.R[RBP], r.R[RAX] = 0xbb, 0xaa
	if s := new(CPU).Run(r, m, NoHooks{}); s.Reason != StopHalt {
		t.Fatalf("Run = %v", s)
	}
	if r.R[RCX] != 0xaa || r.R[RDX] != 0xbb || r.R[RSP] != stackTop {
		t.Errorf("popped rcx %#x rdx %#x rsp %#x", r.R[RCX], r.R[RDX], r.R[RSP])
	}
	if m.copies != 1 || m.pages[top>>PageShift] == orig {
		t.Fatalf("copies %d: the first push did not break COW", m.copies)
	}
	if got := m.read64(stackTop - 8); got != 0xbb {
		t.Errorf("the copy holds %#x, want 0xbb", got)
	}
	if got := orig.b[PageSize-8]; got != 0x55 {
		t.Errorf("the original page was written (%#x)", got)
	}
	if m.calls[Write] != 1 {
		t.Errorf("%d write translations, want 1 (cached after the first)", m.calls[Write])
	}
}

// TestStackFaults: a push, call, pop or ret that faults changes nothing,
// reports the access and address, and can be restarted once the hook fixes
// the cause.
func TestStackFaults(t *testing.T) {
	t.Parallel()
	t.Run("push denied", func(t *testing.T) {
		m, r := newTask(t, []byte{0x55, 0xf4})
		m.denyWrite = true
		before := *r
		h := &hooks{}
		s := new(CPU).Run(r, m, h)
		if s.Reason != StopFault || *r != before {
			t.Fatalf("Run = %v, regs %v; want a fault and unchanged regs", s, r)
		}
		f := s.Fault
		if f.Vector != VectorPF || f.Signal != errno.SIGSEGV || f.Access != Write || f.Addr != stackTop-8 || f.RIP != textBase {
			t.Errorf("fault %+v", f)
		}
		if len(h.faults) != 1 || h.faults[0] != f {
			t.Errorf("Fault hook saw %+v", h.faults)
		}
		// The fix: allow writes and resume; the push is restarted.
		m.denyWrite = false
		if s := new(CPU).Run(r, m, h); s.Reason != StopHalt || r.R[RSP] != stackTop-8 {
			t.Errorf("after the fix: %v, rsp %#x", s, r.R[RSP])
		}
	})
	t.Run("call into a missing page, fixed by the hook", func(t *testing.T) {
		m, r := newTask(t, asm(t, func(a *Asm) { a.Call("f").Hlt().Label("f").Ret() }))
		r.R[RSP] = stackBase // the page below the stack is not mapped
		fixed := false
		h := &hooks{fault: func(r *Regs, f Fault) bool {
			if fixed || f.Addr != stackBase-8 || r.RIP != textBase {
				return false
			}
			m.mmap(stackBase-PageSize, 1, pR|pW) // the stack grows
			fixed = true
			return true
		}}
		if s := new(CPU).Run(r, m, h); s.Reason != StopHalt || !fixed || r.R[RSP] != stackBase {
			t.Fatalf("Run = %v, fixed %v, regs %v", s, fixed, r)
		}
	})
	t.Run("ret from an unmapped stack: SIGBUS passes through", func(t *testing.T) {
		m, r := newTask(t, []byte{0xc3})
		r.R[RSP] = 0x10000
		m.err = errno.SIGBUS
		s := new(CPU).Run(r, m, NoHooks{})
		if s.Reason != StopFault || s.Fault.Signal != errno.SIGBUS || s.Fault.Access != Read || r.RIP != textBase {
			t.Errorf("Run = %v (%+v)", s, s.Fault)
		}
		if !errors.Is(&s.Fault, errno.SIGBUS) {
			t.Errorf("fault does not wrap the Memory's error")
		}
	})
	t.Run("push across a page boundary is all or nothing", func(t *testing.T) {
		m, r := newTask(t, []byte{0x55, 0xf4})
		r.R[RSP] = stackBase + 4 // the push writes 4 bytes of each page
		r.R[RBP] = 0x0102030405060708
		s := new(CPU).Run(r, m, NoHooks{})
		if s.Reason != StopFault || s.Fault.Addr != stackBase-4 || r.R[RSP] != stackBase+4 {
			t.Fatalf("Run = %v, fault %+v", s, s.Fault)
		}
		if got := m.peek(stackBase, 4); string(got) != "\x00\x00\x00\x00" {
			t.Errorf("the mapped page was written: % x", got)
		}
		m.mmap(stackBase-PageSize, 1, pR|pW)
		if s := new(CPU).Run(r, m, NoHooks{}); s.Reason != StopHalt {
			t.Fatalf("Run = %v", s)
		}
		if got := m.read64(stackBase - 4); got != 0x0102030405060708 {
			t.Errorf("straddling push wrote %#x", got)
		}
	})
	t.Run("fetch from a non-executable page", func(t *testing.T) {
		m, r := newTask(t, nil)
		r.RIP = stackBase
		s := new(CPU).Run(r, m, NoHooks{})
		if s.Reason != StopFault || s.Fault.Access != Exec || s.Fault.Addr != stackBase {
			t.Errorf("Run = %v", s)
		}
	})
	t.Run("instruction crossing into an unmapped page", func(t *testing.T) {
		m, r := newTask(t, nil)
		end := uint64(textBase + 2*PageSize)
		m.poke(end-3, []byte{0xe8, 0, 0}) // call rel32 needs 2 more bytes
		r.RIP = end - 3
		s := new(CPU).Run(r, m, NoHooks{})
		if s.Reason != StopFault || s.Fault.Access != Exec || s.Fault.Addr != end || s.Fault.RIP != end-3 {
			t.Errorf("Run = %v", s)
		}
		// A nop right before the boundary does not touch the next page.
		m.poke(end-1, []byte{0x90})
		r.RIP = end - 1
		if s := new(CPU).Step(r, m, NoHooks{}); s.Reason != Stepped || r.RIP != end {
			t.Errorf("Step = %v at %#x", s, r.RIP)
		}
	})
	t.Run("instruction crossing into a mapped page", func(t *testing.T) {
		mid := uint64(textBase + PageSize)
		for back := uint64(1); back <= 9; back++ { // movabs is 10 bytes
			m, r := newTask(t, nil)
			m.poke(mid-back, []byte{0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8})
			r.RIP = mid - back
			if s := new(CPU).Step(r, m, NoHooks{}); s.Reason != Stepped || r.RIP != mid-back+10 || r.R[RAX] != 0x0807060504030201 {
				t.Errorf("movabs %d bytes before the boundary: %v, %v", back, s, r)
			}
		}
	})
}

// TestSingleStepHook: an instruction started with TF set is followed by the
// SingleStep hook; one that faults or traps is not.
func TestSingleStepHook(t *testing.T) {
	t.Parallel()
	m, r := newTask(t, []byte{0x90, 0x90, 0xf4})
	r.Flags |= FlagTF
	var steps []uint64
	h := &hooks{singleStep: func(r *Regs) bool {
		steps = append(steps, r.RIP)
		if len(steps) == 1 {
			r.Flags &^= FlagTF
		}
		return true
	}}
	if s := new(CPU).Run(r, m, h); s.Reason != StopHalt {
		t.Fatal(s)
	}
	if len(steps) != 1 || steps[0] != textBase+1 {
		t.Errorf("single-steps at %x, want one at %#x", steps, textBase+1)
	}
	r.RIP, r.Flags = textBase, FlagTF
	if s := new(CPU).Run(r, m, NoHooks{}); s.Reason != StopSingleStep || r.RIP != textBase+1 {
		t.Errorf("without a resuming hook: %v at %#x", s, r.RIP)
	}
}

func TestZeroAllocs(t *testing.T) {
	code := callNopLoop(t, 1000)
	m, r := newTask(t, code)
	var c CPU
	h := &hooks{}
	allocs := testing.AllocsPerRun(20, func() {
		*r = Regs{RIP: textBase, R: [16]uint64{RSP: stackTop}}
		if s := c.Run(r, m, h); s.Reason != StopHalt {
			t.Fatal(s)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per Run of 5002 instructions, want 0", allocs)
	}
}

// TestConditions checks every jcc condition against the Intel SDM's table,
// for every combination of the flags they read.
func TestConditions(t *testing.T) {
	t.Parallel()
	for bitsSet := range 32 {
		var flags uint64
		on := func(i int, f uint64) bool {
			if bitsSet>>i&1 != 0 {
				flags |= f
				return true
			}
			return false
		}
		cf, pf, zf, sf, of := on(0, FlagCF), on(1, FlagPF), on(2, FlagZF), on(3, FlagSF), on(4, FlagOF)
		want := [16]bool{
			of, !of, cf, !cf, zf, !zf, cf || zf, !cf && !zf,
			sf, !sf, pf, !pf, sf != of, sf == of, zf || sf != of, !zf && sf == of,
		}
		for cc := range uint8(16) {
			if got := cond(cc, flags); got != want[cc] {
				t.Errorf("j%s with flags %#x: %v, want %v", ccNames[cc], flags, got, want[cc])
			}
		}
	}
}

// TestSyscall runs the x86-64 uprobe trampoline's shape (push, mov $nr,
// syscall, pop, ret): the hook sees the number in %rax and the return
// address in %rcx, and the registers the trampoline saved come back.
func TestSyscall(t *testing.T) {
	t.Parallel()
	code := asm(t, func(a *Asm) {
		a.Call("tramp").Hlt()
		a.Label("tramp").Push(RCX).Push(R11).Push(RAX).MovImm32(RAX, 336).Syscall().Pop(RAX).Pop(R11).Pop(RCX).Ret()
	})
	m, r := newTask(t, code)
	r.R[RAX], r.R[RCX], r.R[R11], r.Flags = 1, 2, 3, FlagCF
	var seen Regs
	h := &hooks{syscall: func(r *Regs) bool {
		seen = *r
		r.R[RAX] = 0 // the result, popped over by the trampoline
		return true
	}}
	if s := new(CPU).Run(r, m, h); s.Reason != StopHalt {
		t.Fatal(s)
	}
	sysret := textBase + 5 + 1 + 1 + 2 + 1 + 5 + 2 // after call, hlt, push rcx, push r11, push rax, mov, syscall
	if seen.R[RAX] != 336 || seen.R[RCX] != uint64(sysret) || seen.R[R11] != FlagCF || seen.RIP != uint64(sysret) {
		t.Errorf("the hook saw %v r11=%#x; want rax 336, rcx = rip = %#x, r11 = flags", &seen, seen.R[R11], sysret)
	}
	if r.R[RAX] != 1 || r.R[RCX] != 2 || r.R[R11] != 3 || r.R[RSP] != stackTop || r.RIP != textBase+6 {
		t.Errorf("after the trampoline %v r11=%#x", r, r.R[R11])
	}
	m2, r2 := newTask(t, []byte{0x0f, 0x05})
	if s := new(CPU).Run(r2, m2, NoHooks{}); s.Reason != StopSyscall || r2.RIP != textBase+2 {
		t.Errorf("without a hook: %v at %#x", s, r2.RIP)
	}
}

// TestLoad64Store64: the kernel's user accesses go through Memory with the
// access they need, and break copy-on-write like the task's own.
func TestLoad64Store64(t *testing.T) {
	t.Parallel()
	m, _ := newTask(t, nil)
	var c CPU
	addr := uint64(stackTop - 8)
	m.write64(addr, 0x401234)
	m.cow[addr>>PageShift] = true
	if v, err := c.Load64(m, addr); err != nil || v != 0x401234 || m.copies != 0 {
		t.Fatalf("Load64 = %#x, %v (copies %d)", v, err, m.copies)
	}
	if err := c.Store64(m, addr, 0x7fffffffe000); err != nil || m.copies != 1 || m.read64(addr) != 0x7fffffffe000 {
		t.Fatalf("Store: %v, copies %d, memory %#x", err, m.copies, m.read64(addr))
	}
	if v, err := c.Load64(m, addr); err != nil || v != 0x7fffffffe000 {
		t.Errorf("Load after Store = %#x, %v: the read used a stale translation", v, err)
	}
	if _, err := c.Load64(m, 0x1000); err != errno.SIGSEGV {
		t.Errorf("Load of an unmapped address: %v", err)
	}
	if err := c.Store64(m, textBase, 1); err != errno.SIGSEGV {
		t.Errorf("Store into text: %v", err)
	}
}

// flushingMem flushes the CPU inside every Page call, as the kernel glue does
// when the task slept in a fault (switch_mm on its return).
type flushingMem struct {
	*fakeMem
	c *CPU
}

func (m flushingMem) Page(addr uint64, acc Access) (Page, error) {
	m.c.Flush()
	return m.fakeMem.Page(addr, acc)
}

// TestFlushInsidePage: translations made before a Flush that happens inside
// Memory.Page are not used after it, even within one instruction (a push
// across a page boundary translates twice).
func TestFlushInsidePage(t *testing.T) {
	t.Parallel()
	code := asm(t, func(a *Asm) {
		a.Push(RBP).Call("f").Pop(RCX).Hlt()
		a.Label("f").Nop().Ret()
	})
	fm, r := newTask(t, code)
	r.R[RSP] = stackBase + PageSize + 4 // the push straddles two stack pages
	r.R[RBP] = 0x0102030405060708
	var c CPU
	m := flushingMem{fm, &c}
	if s := c.Run(r, m, NoHooks{}); s.Reason != StopHalt {
		t.Fatalf("Run = %v", s)
	}
	if r.R[RCX] != 0x0102030405060708 || r.R[RSP] != stackBase+PageSize+4 {
		t.Errorf("popped %#x, rsp %#x", r.R[RCX], r.R[RSP])
	}
	if got := fm.read64(stackBase + PageSize - 4); got != 0x0102030405060708 {
		t.Errorf("memory holds %#x", got)
	}
}

// syncingMem runs SyncCore (and Flush) inside every Page call, as the
// text-poke sync IPI does when it reaches a task waiting for a page.
type syncingMem struct {
	*fakeMem
	c *CPU
}

func (m syncingMem) Page(addr uint64, acc Access) (Page, error) {
	m.c.SyncCore()
	m.c.Flush()
	return m.fakeMem.Page(addr, acc)
}

// TestSyncCoreInsidePage: a SyncCore while an instruction waits for its
// data page leaves that instruction's decoding intact (the pops still load
// their own registers), and only makes later fetches decode again.
func TestSyncCoreInsidePage(t *testing.T) {
	t.Parallel()
	code := asm(t, func(a *Asm) {
		a.Push(RBP).Push(RBX).Pop(R11).Pop(RCX).Hlt()
	})
	fm, r := newTask(t, code)
	r.R[RBP], r.R[RBX] = 0x1111, 0x2222
	var c CPU
	if s := c.Run(r, syncingMem{fm, &c}, NoHooks{}); s.Reason != StopHalt {
		t.Fatalf("Run = %v", s)
	}
	if r.R[R11] != 0x2222 || r.R[RCX] != 0x1111 || r.R[RAX] != 0 {
		t.Errorf("r11 %#x rcx %#x rax %#x, want 0x2222 0x1111 0", r.R[R11], r.R[RCX], r.R[RAX])
	}
}
