package cpu

import "math/bits"

// event is how an executed instruction ended.
type event uint8

const (
	evNext  event = iota // completed; r.RIP is the next instruction
	evInt3               // int3 trapped; r.RIP is after the 0xCC
	evHalt               // hlt; r.RIP is after it
	evFault              // faulted (c.fault); r unchanged
)

// exec executes in as the instruction at r.RIP. It changes r and memory only
// if the instruction completes (or traps, for int3).
func (c *CPU) exec(in *Insn, r *Regs, mem Memory) event {
	next := r.RIP + uint64(in.Len)
	switch in.Op {
	case OpNop:
	case OpPush:
		sp := r.R[RSP] - 8
		if a, err := c.store64(mem, sp, r.R[in.Reg]); err != nil {
			c.setPF(r.RIP, a, Write, err)
			return evFault
		}
		r.R[RSP] = sp
	case OpPop:
		v, a, err := c.load64(mem, r.R[RSP])
		if err != nil {
			c.setPF(r.RIP, a, Read, err)
			return evFault
		}
		r.R[RSP] += 8
		r.R[in.Reg] = v // after the increment: pop %rsp loads the value
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
		sp := r.R[RSP] - 8
		if a, err := c.store64(mem, sp, next); err != nil {
			c.setPF(r.RIP, a, Write, err)
			return evFault
		}
		r.R[RSP] = sp
		next += uint64(in.Imm)
	case OpRet:
		v, a, err := c.load64(mem, r.R[RSP])
		if err != nil {
			c.setPF(r.RIP, a, Read, err)
			return evFault
		}
		r.R[RSP] += 8
		next = v
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
	case OpInt3:
		r.RIP = next
		return evInt3
	case OpHlt:
		// A user-mode hlt raises #GP on x86; in the model it ends Run.
		r.RIP = next
		return evHalt
	default:
		c.setUD(r.RIP)
		return evFault
	}
	r.RIP = next
	return evNext
}

// incDec returns v+1 or v-1 at 32 or 64 bits (a 32-bit result zero-extends)
// and flags with OF, SF, ZF, AF and PF set from it; CF is untouched.
func incDec(dec, wide bool, v, flags uint64) (uint64, uint64) {
	size := uint(32)
	if wide {
		size = 64
	}
	mask := uint64(1)<<size - 1 // 1<<64 is 0 in Go, so all ones for 64
	sign := uint64(1) << (size - 1)
	v &= mask
	var res uint64
	flags &^= FlagOF | FlagSF | FlagZF | FlagAF | FlagPF
	if dec {
		res = (v - 1) & mask
		if v == sign {
			flags |= FlagOF
		}
		if v&0xf == 0 {
			flags |= FlagAF
		}
	} else {
		res = (v + 1) & mask
		if v == sign-1 {
			flags |= FlagOF
		}
		if v&0xf == 0xf {
			flags |= FlagAF
		}
	}
	if res == 0 {
		flags |= FlagZF
	}
	if res&sign != 0 {
		flags |= FlagSF
	}
	if bits.OnesCount8(uint8(res))%2 == 0 {
		flags |= FlagPF
	}
	return res, flags
}

// cond evaluates the jcc condition cc (the low nibble of 70+cc) on flags.
// Mirrors arch/x86/kernel/uprobes.c:check_jmp_cond().
func cond(cc uint8, flags uint64) bool {
	f := func(bit uint64) bool { return flags&bit != 0 }
	var t bool
	switch cc >> 1 {
	case 0:
		t = f(FlagOF)
	case 1:
		t = f(FlagCF)
	case 2:
		t = f(FlagZF)
	case 3:
		t = f(FlagCF) || f(FlagZF)
	case 4:
		t = f(FlagSF)
	case 5:
		t = f(FlagPF)
	case 6:
		t = f(FlagSF) != f(FlagOF)
	default:
		t = f(FlagZF) || f(FlagSF) != f(FlagOF)
	}
	return t != (cc&1 != 0)
}
