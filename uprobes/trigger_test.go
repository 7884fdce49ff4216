package uprobes

import (
	"context"
	"testing"
	"time"

	"mmlab/cpu"
	"mmlab/kernel"
)

// Every case runs on both flavours and 2 CPUs, and every call is a hit.
func TestTrigger(t *testing.T) {
	for _, c := range []string{CaseNop, CaseUprobeNop, CaseUretprobeNop, CaseUprobeRet, CaseUprobeNop5} {
		res, err := Trigger(context.Background(), TriggerConfig{Case: c, CPUs: 2,
			Warmup: 5 * time.Millisecond, Duration: 20 * time.Millisecond, Interval: 10 * time.Millisecond})
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if len(res) != 2 || res[0].Flavor != SRCU || res[1].Flavor != TasksTrace {
			t.Fatalf("%s: results %+v", c, res)
		}
		for _, r := range res {
			if len(r.Samples) != 2 || r.Calls == 0 || (c != CaseNop && r.Hits != r.Calls) {
				t.Errorf("%s %s: %d samples, %d calls, %d hits", c, r.Flavor, len(r.Samples), r.Calls, r.Hits)
			}
		}
	}
}

// BenchmarkHit runs each trigger case on one model CPU, b.N calls in one
// Run of the producer loop: ns per call, hit path included (the no-probe
// case is the loop's own cost).
func BenchmarkHit(b *testing.B) {
	for _, c := range []string{CaseNop, CaseUprobeNop, CaseUretprobeNop, CaseUprobeRet} {
		for _, fl := range []string{SRCU, TasksTrace} {
			b.Run(c+"/"+fl, func(b *testing.B) {
				k, err := newTriggerKernel(TriggerConfig{Case: c, CPUs: 1}, fl)
				if err != nil {
					b.Fatal(err)
				}
				defer k.mach.Stop()
				var s cpu.Stop
				var cpuTime time.Duration
				b.ResetTimer()
				r := k.mach.Start(k.leader, 0, 0, func(r *kernel.Runner) {
					r.Regs.RIP = k.entry
					r.Regs.R[cpu.RSP], r.Regs.R[cpu.RCX] = triggerStack-64, uint64(b.N)
					t0, _ := threadCPUTime()
					s = r.Run()
					t1, _ := threadCPUTime()
					cpuTime = t1 - t0
				})
				<-r.Done()
				b.StopTimer()
				if s.Reason != cpu.StopHalt || (c != CaseNop && k.totalHits() != int64(b.N)) {
					b.Fatalf("%v, %d hits for %d calls", s, k.totalHits(), b.N)
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mcalls/s")
				if cpuTime > 0 {
					b.ReportMetric(float64(b.N)/cpuTime.Seconds()/1e6, "Mcalls/cpu-s")
				}
			})
		}
	}
}
