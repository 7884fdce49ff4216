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
