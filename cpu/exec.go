package cpu

import "math/bits"

// event is how an executed instruction ended.
type event uint8

const (
	evNext    event = iota // completed; r.RIP is the next instruction
	evInt3                 // int3 trapped; r.RIP is after the 0xCC
	evHalt                 // hlt; r.RIP is after it
	evSyscall              // syscall; r.RIP is after it
	evFault                // faulted (c.fault); r unchanged
)

// run is the CPU itself; Run, Step and Emulate are its three modes:
//   - Run (once false, given nil): Poll before every instruction, fetch,
//     execute, run the hooks of traps, until a hook or Poll stops it;
//   - Step (once true, given nil): one fetched instruction and its hooks;
//   - Emulate (once true, given non-nil): execute given as the instruction
//     at r.RIP, without fetching it and without hooks; the event says how
//     it ended.
//
// The instructions' semantics are here, in the loop, once: a call per
// instruction costs a third of the speed of the call-nop loop.
//
// An instruction changes r and memory only if it completes (or traps, for
// int3 and syscall); a faulting one leaves everything as it was.
func (c *CPU) run(r *Regs, mem Memory, h Hooks, once bool, given *Insn) (Reason, event) {
	for {
		if !once && h.Poll() {
			return StopPoll, evNext
		}
		tf := r.Flags&FlagTF != 0
		in := given
		if in == nil {
			if in = c.cached(r.RIP); in == nil {
				in = c.fetch(r, mem)
			}
		}
		ev := evFault
		if in != nil {
			ev = evNext
			next := r.RIP + uint64(in.Len)
			switch in.Op {
			case OpNop:
			case OpPush:
				if !c.push(r, mem, r.R[in.Reg]) {
					ev = evFault
				}
			case OpPop:
				if v, ok := c.pop(r, mem); ok {
					r.R[in.Reg] = v // after the increment: pop %rsp loads the value
				} else {
					ev = evFault
				}
			case OpMov:
				v := r.R[in.Src]
				if !in.Wide {
					v = uint64(uint32(v)) // 32-bit results zero-extend
				}
				r.R[in.Reg] = v
			case OpMovImm:
				r.R[in.Reg] = uint64(in.Imm)
				if !in.Wide {
					r.R[in.Reg] = uint64(uint32(in.Imm))
				}
			case OpCall:
				if c.push(r, mem, next) {
					next += uint64(in.Imm)
				} else {
					ev = evFault
				}
			case OpRet:
				if v, ok := c.pop(r, mem); ok {
					next = v
				} else {
					ev = evFault
				}
			case OpJmp:
				next += uint64(in.Imm)
			case OpJcc:
				if cond(in.Cond, r.Flags) {
					next += uint64(in.Imm)
				}
			case OpLoop:
				r.R[RCX]--
				if r.R[RCX] != 0 {
					next += uint64(in.Imm)
				}
			case OpInc, OpDec:
				r.R[in.Reg], r.Flags = incDec(in.Op == OpDec, in.Wide, r.R[in.Reg], r.Flags)
			case OpStore:
				if !c.store(mem, r.RIP, r.R[RSP]+uint64(in.Imm), r.R[in.Src]) {
					ev = evFault
				}
			case OpLea:
				r.R[in.Reg] = r.R[RSP] + uint64(in.Imm)
			case OpCmp:
				a := r.R[in.Reg]
				if in.Mem {
					var ok bool
					if a, ok = c.load(mem, r.RIP, r.R[RSP]+uint64(in.Imm)); !ok {
						ev = evFault
						break
					}
				}
				r.Flags = subFlags(in.Wide, a, r.R[in.Src], r.Flags)
			case OpOr, OpOrImm:
				v := uint64(in.Imm)
				if in.Op == OpOr {
					v = r.R[in.Src]
				}
				r.R[in.Reg], r.Flags = or(in.Wide, r.R[in.Reg], v, r.Flags)
			case OpInt3:
				ev = evInt3
			case OpSyscall:
				// The CPU's part of syscall: the return address in
				// %rcx, the flags in %r11 (the kernel's part is the
				// Syscall hook).
				r.R[RCX], r.R[R11] = next, r.Flags
				ev = evSyscall
			case OpHlt:
				// A user-mode hlt raises #GP on x86; in the model
				// it ends Run.
				ev = evHalt
			default:
				c.setUD(r.RIP)
				ev = evFault
			}
			if ev != evFault {
				r.RIP = next
			}
		}
		if given != nil {
			return Stepped, ev
		}
		if ev != evNext || tf {
			if s := c.trap(ev, r, h); s != Stepped || once {
				return s, ev
			}
		} else if once {
			return Stepped, ev
		}
	}
}

// push stores v in the 8 bytes below r's stack pointer and moves it down to
// them, for the instruction at r.RIP; on a fault it sets c.fault, leaves r
// as it was and returns false.
func (c *CPU) push(r *Regs, mem Memory, v uint64) bool {
	if c.store(mem, r.RIP, r.R[RSP]-8, v) {
		r.R[RSP] -= 8
		return true
	}
	return false
}

// pop loads the 8 bytes at r's stack pointer and moves it up past them, and
// faults as push does. Both are within the inliner's budget, so the loop
// pays one call (load or store) per stack access, as for OpStore and OpCmp.
func (c *CPU) pop(r *Regs, mem Memory) (v uint64, ok bool) {
	if v, ok = c.load(mem, r.RIP, r.R[RSP]); ok {
		r.R[RSP] += 8
	}
	return v, ok
}

// incDec returns v+1 or v-1 at 32 or 64 bits (a 32-bit result zero-extends)
// and flags with OF, SF, ZF, AF and PF set from it; CF is untouched.
func incDec(dec, wide bool, v, flags uint64) (uint64, uint64) {
	shift := uint(32) // work at the top of the register so bit 63 is the sign
	if wide {
		shift = 0
	}
	d := uint64(1)
	if dec {
		d = ^uint64(0)
	}
	x, d := v<<shift, d<<shift
	y := x + d
	res := y >> shift
	f := flags&^(FlagOF|FlagSF|FlagZF|FlagAF|FlagPF) |
		((x^y)&^(x^d))>>63<<11 | // OF: the sign changed, away from the addend's
		y>>63<<7 | // SF
		(v^res)&FlagAF | // bit 4 flips iff there was a carry or borrow out of bit 3
		uint64(parity[uint8(res)])
	if y == 0 {
		f |= FlagZF
	}
	return res, f
}

// subFlags returns flags with CF, PF, AF, ZF, SF and OF set from a-b at 32
// or 64 bits (what cmp computes).
func subFlags(wide bool, a, b, flags uint64) uint64 {
	shift := uint(32)
	if wide {
		shift = 0
	}
	x, y := a<<shift, b<<shift
	d := x - y
	f := flags&^(FlagCF|FlagOF|FlagSF|FlagZF|FlagAF|FlagPF) |
		((x^y)&(x^d))>>63<<11 | // OF: the operands' signs differ and the result's is not a's
		d>>63<<7 | // SF
		(a^b^d>>shift)&FlagAF | // the borrow into bit 4
		uint64(parity[uint8(d>>shift)])
	if x < y {
		f |= FlagCF
	}
	if d == 0 {
		f |= FlagZF
	}
	return f
}

// or returns v|w at 32 or 64 bits (a 32-bit result zero-extends) and flags
// with CF and OF clear, SF, ZF and PF set from the result and AF clear (the
// CPU leaves it undefined).
func or(wide bool, v, w, flags uint64) (uint64, uint64) {
	res := v | w
	shift := uint(32)
	if wide {
		shift = 0
	} else {
		res = uint64(uint32(res))
	}
	f := flags&^(FlagCF|FlagOF|FlagSF|FlagZF|FlagAF|FlagPF) | res<<shift>>63<<7 | uint64(parity[uint8(res)])
	if res == 0 {
		f |= FlagZF
	}
	return res, f
}

// parity[b] is FlagPF if b has an even number of ones.
var parity = func() (t [256]uint8) {
	for i := range t {
		if bits.OnesCount8(uint8(i))%2 == 0 {
			t[i] = uint8(FlagPF)
		}
	}
	return t
}()

// cond evaluates the jcc condition cc (the low nibble of 70+cc) on flags.
// Mirrors arch/x86/kernel/uprobes.c:check_jmp_cond().
func cond(cc uint8, flags uint64) bool {
	of, cf, zf := flags>>11&1, flags&1, flags>>6&1
	sf, pf := flags>>7&1, flags>>2&1
	var t uint64
	switch cc >> 1 {
	case 0: // jo, jno
		t = of
	case 1: // jb, jae
		t = cf
	case 2: // je, jne
		t = zf
	case 3: // jbe, ja
		t = cf | zf
	case 4: // js, jns
		t = sf
	case 5: // jp, jnp
		t = pf
	case 6: // jl, jge
		t = sf ^ of
	default: // jle, jg
		t = zf | (sf ^ of)
	}
	return t^uint64(cc&1) != 0
}
