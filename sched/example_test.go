package sched_test

import (
	"errors"
	"fmt"

	"mmlab/sched"
)

// A deterministic run of two threads that take two locks in opposite
// orders: the seed picks an interleaving that deadlocks, the error names the
// wait cycle, and the record's schedule replays it.
func ExampleSystem_Run() {
	build := func(cfg sched.Config) *sched.System {
		cfg.CPUs, cfg.Deterministic = 2, true
		s := sched.New(cfg)
		a, b := make(chan struct{}), make(chan struct{}) // never woken
		lockA, lockB := new(int), new(int)
		s.SpawnNamed("ab", 0, 0, func(*sched.Thread) {
			sched.Acquired(lockA, "A", true)
			sched.At("down_write", "B")
			sched.Wait(lockB, "B", b, nil)
		})
		s.SpawnNamed("ba", 1, 0, func(*sched.Thread) {
			sched.Acquired(lockB, "B", true)
			sched.At("down_write", "A")
			sched.Wait(lockA, "A", a, nil)
		})
		return s
	}
	rec, err := build(sched.Config{Seed: 1}).Run()
	var de *sched.DeadlockError
	fmt.Println(errors.As(err, &de), de)
	fmt.Print(rec)
	_, again := build(sched.Config{Seed: 2, Schedule: rec.Schedule()}).Run()
	fmt.Println(errors.Unwrap(again).Error() == de.Error())
	// Output:
	// true sched: deadlock: wait cycle: T1(ab) waits for B holding [A(w)]; T2(ba) waits for A holding [B(w)]
	// seed 1, 5 decisions, schedule [1 2 1]
	//     1       0s - start -> T1(ab) of 2
	//     2       0s T1(ab) down_write(B) holding [A(w)] -> T2(ba) of 2
	//     3       0s T2(ba) down_write(A) holding [B(w)] -> T1(ab) of 2
	//     4       0s T1(ab) block(B) holding [A(w)] -> T2(ba)
	//     5       0s T2(ba) block(A) holding [B(w)] -> -
	// true
}
