package smp_test

import (
	"testing"
	"time"

	"mmlab/machine"
	"mmlab/sched"
	"mmlab/smp"
)

// BenchmarkAccess is one shared word's Add: in real time, in a sim run
// on one CPU (the layer's own cost), and in a sim run of two CPUs that share the word (its line moves on most accesses),
// each access followed by a 10 ns charge (the sim's cost of a decision).
func BenchmarkAccess(b *testing.B) {
	b.Run("realtime", func(b *testing.B) {
		var w smp.Int64
		w.Init("w")
		for b.Loop() {
			w.Add(1)
		}
	})
	b.Run("sim-local", func(b *testing.B) {
		// The layer alone: one thread, no decision between accesses.
		d := machine.MustNamed("xeon-gold-6138-2s")
		sys := sched.New(sched.Config{CPUs: 2, Seed: 1, Sim: &sched.SimConfig{Until: time.Hour, Machine: &d}})
		var w smp.Int64
		w.Init("w")
		sys.Spawn(0, 0, func(*sched.Thread) {
			for range b.N {
				w.Add(1)
			}
		})
		b.ResetTimer()
		if _, err := sys.Run(); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("sim", func(b *testing.B) {
		d := machine.MustNamed("xeon-gold-6138-2s")
		sys := sched.New(sched.Config{CPUs: 2, Seed: 1, Sim: &sched.SimConfig{Until: time.Hour, Machine: &d}})
		var w smp.Int64
		w.Init("w")
		for cpu := range 2 {
			sys.Spawn(cpu, 0, func(*sched.Thread) {
				for range b.N / 2 {
					w.Add(1)
					sched.Charge(10 * time.Nanosecond)
				}
			})
		}
		b.ResetTimer()
		if _, err := sys.Run(); err != nil {
			b.Fatal(err)
		}
	})
}
