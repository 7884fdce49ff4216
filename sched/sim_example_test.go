package sched_test

import (
	"fmt"
	"time"

	"mmlab/sched"
)

// A sim run: a nice-15 task beside a nice-0 hog on one virtual CPU at
// HZ=250. New, the nice-15 task has no lag and waits for the hog's first
// request to end, which the tick at 4 ms notices; after 0.1 ms of work it
// sleeps owed service, so when it wakes it preempts the hog at once.
func Example_sim() {
	sys := sched.New(sched.Config{CPUs: 1, Seed: 1, Sim: &sched.SimConfig{Until: 20 * time.Millisecond, HZ: 250}})
	sys.SpawnNamed("hog", 0, 0, func(*sched.Thread) {
		for {
			sched.ChargeUser(time.Second)
		}
	})
	sys.SpawnNamed("nice15", 0, 15, func(*sched.Thread) {
		fmt.Println("first runs at", sched.Since(sched.Epoch))
		sched.ChargeUser(100 * time.Microsecond)
		sched.Sleep(5 * time.Millisecond)
		fmt.Println("runs again at", sched.Since(sched.Epoch))
	})
	rec, err := sys.Run()
	fmt.Println("ended at", rec.End, "time limit", rec.TimeLimit, err)
	// Output:
	// first runs at 4ms
	// runs again at 9.1ms
	// ended at 20ms time limit true <nil>
}
