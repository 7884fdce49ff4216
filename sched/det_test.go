package sched

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// detRunLog runs three threads that append to a shared log at preemption
// points and returns the log and the record.
func detRunLog(t *testing.T, cfg Config) ([]string, *Record, error) {
	t.Helper()
	cfg.CPUs, cfg.Deterministic = 2, true
	s := New(cfg)
	var log []string
	for i := range 3 {
		s.SpawnNamed(fmt.Sprintf("w%d", i), i%2, 0, func(th *Thread) {
			for j := range 4 {
				log = append(log, fmt.Sprintf("%d.%d", i, j))
				At("step", "")
			}
		})
	}
	rec, err := s.Run()
	return log, rec, err
}

// The same seed gives the same interleaving and record; the record's
// schedule replays it under another seed; different seeds interleave
// differently (one of a few must differ).
func TestDetSameSeedSameRun(t *testing.T) {
	log1, rec1, err := detRunLog(t, Config{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	log2, rec2, _ := detRunLog(t, Config{Seed: 7})
	if !slices.Equal(log1, log2) || rec1.String() != rec2.String() {
		t.Fatalf("same seed, different runs:\n%v\n%v", log1, log2)
	}
	log3, rec3, err := detRunLog(t, Config{Seed: 99, Schedule: rec1.Schedule()})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(log1, log3) || !slices.Equal(rec1.Schedule(), rec3.Schedule()) {
		t.Fatalf("replay differs:\n%v\n%v", log1, log3)
	}
	differ := false
	for seed := uint64(1); seed < 6 && !differ; seed++ {
		l, _, _ := detRunLog(t, Config{Seed: 7 + seed})
		differ = !slices.Equal(l, log1)
	}
	if !differ {
		t.Error("five other seeds all gave seed 7's interleaving")
	}
	if len(log1) != 12 {
		t.Errorf("%d steps logged, want 12", len(log1))
	}
}

// A forced choice of a thread that cannot run fails the run with
// ErrSchedule, and the record says where.
func TestDetBadSchedule(t *testing.T) {
	_, _, err := detRunLog(t, Config{Schedule: []int{42}})
	if !errors.Is(err, ErrSchedule) {
		t.Fatalf("err %v, want ErrSchedule", err)
	}
}

// Wait sleeps until Notify; the sleeper is not chosen before.
func TestDetWaitNotify(t *testing.T) {
	for seed := range uint64(20) {
		s := New(Config{CPUs: 1, Deterministic: true, Seed: seed})
		ch := make(chan struct{}, 1)
		var log []string
		s.SpawnNamed("sleeper", 0, 0, func(*Thread) {
			Wait(nil, "ch", ch, nil)
			log = append(log, "woken")
		})
		s.SpawnNamed("waker", 0, 0, func(*Thread) {
			At("a", "")
			log = append(log, "notify")
			Notify(ch)
		})
		if _, err := s.Run(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(log, []string{"notify", "woken"}) {
			t.Fatalf("seed %d: %v", seed, log)
		}
	}
}

// Two threads that each hold one lock and wait for the other's: the run
// ends with a DeadlockError that names the cycle; the deferred calls of the
// deadlocked threads run.
func TestDetDeadlockCycle(t *testing.T) {
	s := New(Config{CPUs: 2, Deterministic: true})
	a, b := make(chan struct{}), make(chan struct{})
	lockA, lockB := new(int), new(int)
	cleaned := 0
	s.SpawnNamed("t1", 0, 0, func(*Thread) {
		defer func() { cleaned++ }()
		Acquired(lockA, "A", true)
		At("x", "")
		Wait(lockB, "B", b, nil)
	})
	s.SpawnNamed("t2", 1, 0, func(*Thread) {
		defer func() { cleaned++ }()
		Acquired(lockB, "B", true)
		At("x", "")
		Wait(lockA, "A", a, nil)
	})
	rec, err := s.Run()
	var de *DeadlockError
	if !errors.As(err, &de) || !errors.Is(err, ErrDeadlock) {
		t.Fatalf("err %v, want a DeadlockError", err)
	}
	if len(de.Cycle) != 2 || de.Cycle[0].WaitFor != "B" || de.Cycle[1].WaitFor != "A" {
		t.Errorf("cycle %+v", de.Cycle)
	}
	if cleaned != 2 {
		t.Errorf("%d deferred calls ran, want 2", cleaned)
	}
	if !strings.Contains(rec.String(), "holding [A(w)]") {
		t.Errorf("record does not show the held lock:\n%v", rec)
	}
	s.Stop()
}

// Virtual time advances only when every thread sleeps, and then to the
// earliest deadline; nobody sleeps for real.
func TestDetVirtualTime(t *testing.T) {
	s := New(Config{CPUs: 1, Deterministic: true})
	var got []string
	for _, d := range []time.Duration{3 * time.Hour, time.Hour} {
		s.SpawnNamed(d.String(), 0, 0, func(*Thread) {
			Sleep(d)
			got = append(got, fmt.Sprintf("%v@%v", d, Since(Epoch)))
		})
	}
	start := time.Now()
	if _, err := s.Run(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"1h0m0s@1h0m0s", "3h0m0s@3h0m0s"}) {
		t.Errorf("wake-ups %v", got)
	}
	if time.Since(start) > time.Hour {
		t.Error("slept for real")
	}
}

// A Check failure ends the run at the decision where it first fails.
func TestDetCheck(t *testing.T) {
	n := 0
	s := New(Config{CPUs: 1, Deterministic: true, Check: func() error {
		if n == 3 {
			return errors.New("n is 3")
		}
		return nil
	}})
	s.Spawn(0, 0, func(*Thread) {
		for range 10 {
			n++
			At("inc", "")
		}
	})
	_, err := s.Run()
	var ce *CheckError
	if !errors.As(err, &ce) || n != 3 {
		t.Fatalf("err %v, n %d; want a CheckError at n == 3", err, n)
	}
}

// A deterministic run gives the same record under GOMAXPROCS 1 and 2.
func TestDetGOMAXPROCS(t *testing.T) {
	var recs []string
	for _, p := range []int{1, 2} {
		old := runtime.GOMAXPROCS(p)
		_, rec, err := detRunLog(t, Config{Seed: 3})
		runtime.GOMAXPROCS(old)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec.String())
	}
	if recs[0] != recs[1] {
		t.Fatalf("GOMAXPROCS changes the run:\n%s\n%s", recs[0], recs[1])
	}
}

// BenchmarkDetSwitch measures the deterministic mode's bare decision: two
// threads that do nothing but pass preemption points, so that nearly every
// decision hands the baton to the other goroutine.
func BenchmarkDetSwitch(b *testing.B) {
	s := New(Config{CPUs: 2, Deterministic: true, MaxSteps: b.N + 10})
	for i := range 2 {
		s.Spawn(i, 0, func(*Thread) {
			for range b.N / 2 {
				At("step", "")
			}
		})
	}
	b.ResetTimer()
	rec, err := s.Run()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(rec.Decisions))/b.Elapsed().Seconds(), "decisions/s")
}

// A run that ends in a deadlock ends every live thread, even one whose
// deferred calls pass preemption points and sleep again; replaying its
// schedule gives the same deadlock and record.
func TestDetAbortAndReplayDeadlock(t *testing.T) {
	build := func(cfg Config) *System {
		cfg.CPUs, cfg.Deterministic = 2, true
		s := New(cfg)
		never := make(chan struct{})
		lock := new(int)
		s.SpawnNamed("holder", 0, 0, func(*Thread) {
			defer func() {
				At("deferred", "")
				Wait(nil, "never, again", never, nil)
			}()
			Acquired(lock, "L", true)
			for range 3 {
				At("work", "")
			}
			Wait(nil, "never", never, nil)
		})
		s.SpawnNamed("waiter", 1, 0, func(*Thread) {
			At("start", "")
			Wait(lock, "L", never, nil)
		})
		return s
	}
	rec, err := build(Config{Seed: 5}).Run()
	if !errors.Is(err, ErrDeadlock) {
		t.Fatalf("err %v, want a deadlock", err)
	}
	rec2, err2 := build(Config{Seed: 77, Schedule: rec.Schedule()}).Run()
	if err2 == nil || errors.Unwrap(err2).Error() != errors.Unwrap(err).Error() {
		t.Fatalf("replay: %v, want %v", err2, err)
	}
	if strings.SplitN(rec.String(), "\n", 2)[1] != strings.SplitN(rec2.String(), "\n", 2)[1] {
		t.Fatalf("replay's record differs:\n%v\n%v", rec, rec2)
	}
}

// A long deterministic run keeps recording its decisions: the chunks grow
// from firstChunk to recordChunk and stay there, past the point where
// firstChunk<<n would overflow (about 56 chunks, some 213,000 decisions).
func TestDetRecordLongRun(t *testing.T) {
	var r detRun
	const n = 300_000
	for i := range n {
		r.record(Decision{Step: i})
	}
	got := 0
	for i, c := range r.chunks {
		got += len(c)
		if cap(c) > recordChunk || (i > 0 && cap(c) < cap(r.chunks[i-1])) {
			t.Fatalf("chunk %d has capacity %d", i, cap(c))
		}
	}
	if got != n || r.steps != n {
		t.Fatalf("%d decisions recorded, %d steps, want %d", got, r.steps, n)
	}
}
