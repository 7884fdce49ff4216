package sched

import "testing"

// In a deterministic run (one thread at a time) a thread spinning with
// Relax lets the thread it waits for run: without the preemption point the
// run would never end.
func TestRelaxLetsTheAwaitedThreadRun(t *testing.T) {
	s := New(Config{CPUs: 1, Deterministic: true, Seed: 1})
	set := false
	s.SpawnNamed("spinner", 0, 0, func(*Thread) {
		for !set {
			Relax("spin")
		}
	})
	s.SpawnNamed("setter", 0, 0, func(*Thread) { set = true })
	if _, err := s.Run(); err != nil {
		t.Fatal(err)
	}
}
