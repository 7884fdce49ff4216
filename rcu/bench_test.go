package rcu

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"mmlab/host"
	"mmlab/sched"
)

// BenchmarkReadLockUnlock measures one read-side lock/unlock pair, called
// through the Flavor interface as the uprobe hit path does. With cpus=2 a
// thread on each model CPU runs b.N pairs at once, so ns/op is the time per
// pair on one CPU (equal to cpus=1 when the flavour scales perfectly).
// On Linux it also reports cpu-ns/op, the CPU time of the threads per pair
// and per CPU, which stays meaningful when other processes load the machine.
func BenchmarkReadLockUnlock(b *testing.B) {
	for _, fl := range flavours {
		for _, ncpu := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/cpus=%d", fl.name, ncpu), func(b *testing.B) {
				sys := sched.New(sched.Config{CPUs: 2, Host: host.Threads{}})
				defer sys.Stop()
				f := fl.make(sys, nil)
				n := b.N
				var ths []*sched.Thread
				cpu := make([]time.Duration, ncpu)
				cpuOK := make([]bool, ncpu)
				b.ResetTimer()
				for c := range ncpu {
					ths = append(ths, sys.Spawn(c, 0, func(th *sched.Thread) {
						start, ok := host.ThreadCPUTime()
						for range n {
							f.ReadUnlock(th, f.ReadLock(th))
						}
						end, _ := host.ThreadCPUTime()
						cpu[c], cpuOK[c] = end-start, ok
					}))
				}
				for _, th := range ths {
					<-th.Done()
				}
				b.StopTimer()
				if !slices.Contains(cpuOK, false) {
					var sum time.Duration
					for _, d := range cpu {
						sum += d
					}
					b.ReportMetric(float64(sum)/float64(ncpu)/float64(n), "cpu-ns/op")
				}
			})
		}
	}
}

// BenchmarkSynchronize measures a grace period with a thread on each model
// CPU outside any read section: none (idle CPUs), blocked (sleeping in
// Block), or running (spinning on Points, so Tasks Trace must IPI them).
func BenchmarkSynchronize(b *testing.B) {
	for _, fl := range flavours {
		for _, readers := range []string{"none", "blocked", "running"} {
			b.Run(fmt.Sprintf("%s/readers=%s", fl.name, readers), func(b *testing.B) {
				sys := sched.New(sched.Config{CPUs: 2, Host: host.Threads{}})
				f := fl.make(sys, nil)
				release := newGate()
				for c := range 2 {
					if readers != "none" {
						sys.Spawn(c, 0, func(th *sched.Thread) { hold(th, readers == "blocked", release.c) })
					}
				}
				for b.Loop() {
					f.Synchronize()
				}
				release.open()
				sys.Stop()
			})
		}
	}
}
