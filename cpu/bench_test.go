package cpu

import "testing"

// BenchmarkCallNopLoop runs the trigger benchmark's producer loop,
// "call f; dec ecx; jnz", f = "nop; ret", b.N times in one Run, and reports
// calls per second of wall time (Mcalls/s) and of the process's CPU time
// (Mcalls/cpu-s, which a busy machine distorts less; the benchmark runs one
// goroutine, so this is what one dedicated core would do).
func BenchmarkCallNopLoop(b *testing.B) {
	m, r := newTask(b, callNopLoop(b, uint32(b.N)))
	var c CPU
	b.ReportAllocs()
	b.ResetTimer()
	t0 := cpuTime()
	// NoHooks.Poll is a method call that does nothing.
	if s := c.Run(r, m, NoHooks{}); s.Reason != StopHalt {
		b.Fatal(s)
	}
	cpu := cpuTime() - t0
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mcalls/s")
	if cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu.Seconds()/1e6, "Mcalls/cpu-s")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(5*b.N), "ns/insn")
}

// BenchmarkInt3Emulate is the CPU's part of a uprobe hit on the nop of the
// called function: the int3 traps, the hook rewinds RIP and emulates the
// original nop (no handlers, no lookup). It reports hits per second.
func BenchmarkInt3Emulate(b *testing.B) {
	code := callNopLoop(b, uint32(b.N))
	f := uint64(textBase + len(code) - 2)
	m, r := newTask(b, code)
	m.poke(f, []byte{0xcc})
	nop, err := Decode([]byte{0x90})
	if err != nil {
		b.Fatal(err)
	}
	var c CPU
	h := &emulateHooks{c: &c, mem: m, in: nop}
	b.ReportAllocs()
	b.ResetTimer()
	t0 := cpuTime()
	if s := c.Run(r, m, h); s.Reason != StopHalt {
		b.Fatal(s)
	}
	cpu := cpuTime() - t0
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mhits/s")
	if cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu.Seconds()/1e6, "Mhits/cpu-s")
	}
}

type emulateHooks struct {
	NoHooks
	c   *CPU
	mem Memory
	in  Insn
}

func (h *emulateHooks) Int3(r *Regs) bool {
	r.RIP--
	return h.c.Emulate(&h.in, r, h.mem) == nil
}
