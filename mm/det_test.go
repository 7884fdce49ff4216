package mm

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"mmlab/locking/lockrank"
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

// Two tasks that take two mms' mmap locks in opposite orders deadlock under
// some seed, and the run reports the wait cycle through the two locks.
func TestDetMmapLockDeadlockCycle(t *testing.T) {
	found := false
	for seed := range uint64(64) {
		sys := sched.New(sched.Config{CPUs: 2, Deterministic: true, Seed: seed})
		var ns Namespace
		a, b := New(&ns, testFeatures), New(&ns, testFeatures)
		a.MmapLock.SetName("mmap_lock A")
		b.MmapLock.SetName("mmap_lock B")
		// The inversion is the test's point: let -tags invariants pass it.
		sys.ExemptLockOrder(lockrank.Exemption{Name: "ABBA on purpose", Pairs: [][2]lockrank.Class{{lockrank.MmapLock, lockrank.MmapLock}}})
		for i, order := range [][2]*MM{{a, b}, {b, a}} {
			sys.SpawnNamed(fmt.Sprintf("task%d", i), i, 0, func(*sched.Thread) {
				order[0].MmapWriteLock(nil)
				order[1].MmapWriteLock(nil)
				order[1].MmapWriteUnlock()
				order[0].MmapWriteUnlock()
			})
		}
		_, err := sys.Run()
		if err == nil {
			continue
		}
		var de *sched.DeadlockError
		if !errors.As(err, &de) {
			t.Fatalf("seed %d: %v, want a deadlock", seed, err)
		}
		if len(de.Cycle) != 2 || de.Cycle[0].WaitFor == de.Cycle[1].WaitFor ||
			!strings.HasPrefix(de.Cycle[0].WaitFor, "mmap_lock") {
			t.Fatalf("seed %d: cycle %+v", seed, de.Cycle)
		}
		t.Logf("seed %d: %v", seed, err)
		found = true
		break
	}
	if !found {
		t.Error("no seed of 64 interleaved the lock orders into a deadlock")
	}
}
