package mm

import (
	"testing"

	"mmlab/sched"
)

// tasks starts the tasks of a driven test: goroutines, or the threads of a
// deterministic run.
type tasks struct{ sys *sched.System }

// spawn runs fn as a task; the channel is closed when it returns.
func (k tasks) spawn(name string, fn func()) <-chan struct{} {
	done := make(chan struct{})
	body := func() {
		defer sched.Close(done)
		fn()
	}
	if k.sys != nil {
		k.sys.SpawnNamed(name, 0, 0, func(*sched.Thread) { body() })
	} else {
		go body()
	}
	return done
}

// wait waits until a task spawned returned.
func wait(done <-chan struct{}) { sched.Wait(nil, "test task", done, nil) }

// finished reports whether a task spawned returned.
func finished(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// detSeeds is how many seeds forModes runs a test under.
const detSeeds = 8

// forModes runs body with real goroutines, then as the "test" thread of
// deterministic runs under detSeeds seeds; a failing run prints its seed
// and decisions.
func forModes(t *testing.T, body func(t *testing.T, k tasks)) {
	t.Run("real", func(t *testing.T) { body(t, tasks{}) })
	t.Run("det", func(t *testing.T) {
		for seed := range uint64(detSeeds) {
			sys := sched.New(sched.Config{CPUs: 2, Deterministic: true, Seed: seed})
			sys.SpawnNamed("test", 0, 0, func(*sched.Thread) { body(t, tasks{sys}) })
			rec, err := sys.Run()
			if err != nil || t.Failed() {
				t.Fatalf("seed %d: %v\n%v", seed, err, rec)
			}
		}
	})
}
