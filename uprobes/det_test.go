package uprobes

import (
	"flag"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"mmlab/kernel"
	"mmlab/mm"
	"mmlab/mm/pgtable"
	"mmlab/sched"
)

// Seeds of the deterministic runs: -det.seed picks the first, -det.seeds
// how many (a failing run prints its seed and schedule; -det.seed=N
// -det.seeds=1 replays it).
var (
	detSeed  = flag.Uint64("det.seed", 1, "first seed of the deterministic runs")
	detSeeds = flag.Int("det.seeds", 8, "number of seeds of the deterministic runs")
)

// detEnv is designEnv on a deterministic System of ncpu CPUs.
func detEnv(t testing.TB, d kernel.Design, ncpu int, seed uint64) *env {
	e := newEnvOn(t, sched.New(sched.Config{CPUs: ncpu, Deterministic: true, Seed: seed}), Config{Flavor: TasksTrace, Design: d, HitPath: HitPathToday, Optimize: OptimizeCall}, loopProg)
	return e
}

// outcome is the end of a task started by spawn.
type outcome struct {
	done chan struct{}
	err  error
}

// wait waits until the task returned and gives its error.
func (o *outcome) wait() error {
	sched.Wait(nil, "test task", o.done, nil)
	return o.err
}

// finished reports whether the task returned.
func (o *outcome) finished() bool { return sched.TryRecv(o.done) }

// spawn runs fn as a task of e: a goroutine, or in a deterministic env a
// thread of its run.
func (e *env) spawn(name string, fn func() error) *outcome {
	o := &outcome{done: make(chan struct{})}
	body := func() {
		defer sched.Close(o.done)
		o.err = fn()
	}
	if e.mach.Sys.Deterministic() {
		e.mach.Sys.SpawnNamed(name, 0, 0, func(*sched.Thread) { body() })
	} else {
		go body()
	}
	return o
}

// sem is a counting semaphore for step-driven tests, in either mode.
type sem struct {
	n  atomic.Int64
	ch chan struct{}
}

func newSem() *sem { return &sem{ch: make(chan struct{}, 1)} }

func (s *sem) post() { s.n.Add(1); sched.Notify(s.ch) }

func (s *sem) take() {
	for {
		if n := s.n.Load(); n > 0 && s.n.CompareAndSwap(n, n-1) {
			return
		}
		sched.Wait(nil, "test step", s.ch, nil)
	}
}

// forDesigns runs body in each design, in each mode of forModes.
func forDesigns(t *testing.T, body func(t *testing.T, d kernel.Design, e *env)) {
	for _, d := range designs {
		t.Run(d.String(), func(t *testing.T) {
			forModes(t, d, func(t *testing.T, e *env) { body(t, d, e) })
		})
	}
}

// forModes runs body on real goroutines, then as the "test" thread of
// deterministic runs under -det.seeds seeds; a failing deterministic run
// prints its seed and decisions.
func forModes(t *testing.T, d kernel.Design, body func(t *testing.T, e *env)) {
	t.Run("real", func(t *testing.T) { body(t, designEnv(t, d)) })
	t.Run("det", func(t *testing.T) {
		for seed := *detSeed; seed < *detSeed+uint64(*detSeeds); seed++ {
			e := detEnv(t, d, 1, seed)
			e.mach.Sys.SpawnNamed("test", 0, 0, func(*sched.Thread) { body(t, e) })
			rec, err := e.mach.Sys.Run()
			if err != nil || t.Failed() {
				t.Fatalf("seed %d: %v\n%v", seed, err, rec)
			}
		}
	})
}

// regVsFork is the registration-vs-fork scenario: a tracer registers and
// unregisters a uprobe on f while a forker forks (and its children exit)
// and a busy process populates and unmaps memory, holding its mmap lock.
// It returns what the tasks saw, one line each, for the determinism test.
func regVsFork(t testing.TB, d kernel.Design, seed uint64, schedule []int) (string, *sched.Record, error) {
	run := newRegVsFork(t, d, seed, schedule, 2, 3)
	return run()
}

// newRegVsFork builds the scenario (regs registrations, forks forks) and
// returns the function that runs it.
func newRegVsFork(t testing.TB, d kernel.Design, seed uint64, schedule []int, regs, forks int) func() (string, *sched.Record, error) {
	e := newEnvOn(t, sched.New(sched.Config{CPUs: 2, Deterministic: true, Seed: seed, Schedule: schedule}), Config{Flavor: TasksTrace, Design: d, HitPath: HitPathToday, Optimize: OptimizeCall}, loopProg)
	var out strings.Builder
	logf := func(format string, args ...any) { fmt.Fprintf(&out, format+"\n", args...) }
	parent := e.newProc(t, "forker")
	busy := e.newProc(t, "busy")
	tracer := e.mach.NewTask("tracer")
	start := func(task *kernel.Task, cpu int, body func()) {
		e.mach.Start(task, cpu, 0, func(*kernel.Runner) { body() })
	}
	start(tracer, 0, func() {
		k := newCounter(true, false, nil)
		for i := range regs {
			up, err := e.u.Register(tracer, e.inode, e.off("f"), &k.c)
			logf("register %d: %v", i, err)
			if err != nil {
				return
			}
			logf("unregister %d: %v", i, e.u.UnregisterNosync(tracer, up, &k.c))
			e.u.UnregisterSync(tracer)
		}
	})
	start(parent, 1, func() {
		for i := range forks {
			c, err := parent.Fork()
			if err != nil {
				logf("fork %d: %v", i, err)
				return
			}
			b, _ := c.MM.LoadByte(nil, e.addr("f"))
			logf("fork %d: child has %#x", i, b)
			c.ExitMM()
		}
	})
	start(busy, 1, func() {
		for range forks {
			a, err := busy.MM.Mmap(busy, 0, 4*pgtable.PageSize, mm.PROT_READ|mm.PROT_WRITE,
				mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_POPULATE, nil, 0)
			if err == nil {
				err = busy.MM.Munmap(busy, a, 4*pgtable.PageSize)
			}
			logf("busy: %v", err)
		}
	})
	return func() (string, *sched.Record, error) {
		rec, err := e.mach.Sys.Run()
		logf("passes %d, uprobes left %d", e.u.Passes(), e.u.Len())
		for _, tk := range []*kernel.Task{tracer, parent, busy} {
			logf("%s blocked: %v", tk.Comm, tk.Blocked())
		}
		return out.String(), rec, err
	}
}

// Same seed, same run: the scenario's record of decisions and its results
// are byte-identical across runs, under GOMAXPROCS 1 and 2, and the
// record's schedule replays it under another seed.
func TestDetRegVsForkSameSeedSameRun(t *testing.T) {
	for _, d := range designs {
		t.Run(d.String(), func(t *testing.T) {
			for seed := *detSeed; seed < *detSeed+uint64(*detSeeds); seed++ {
				var first string
				var firstRec *sched.Record
				for _, procs := range []int{1, 2, 1, 2} {
					old := runtime.GOMAXPROCS(procs)
					out, rec, err := regVsFork(t, d, seed, nil)
					runtime.GOMAXPROCS(old)
					if err != nil {
						t.Fatalf("seed %d: %v\n%v", seed, err, rec)
					}
					got := rec.String() + out
					if first == "" {
						first, firstRec = got, rec
						continue
					}
					if got != first {
						t.Fatalf("seed %d, GOMAXPROCS %d: the run differs:\n%s\nfirst:\n%s", seed, procs, got, first)
					}
				}
				out, rec, err := regVsFork(t, d, seed+1000, firstRec.Schedule())
				if err != nil {
					t.Fatal(err)
				}
				if got := rec.String() + out; strings.SplitN(got, "\n", 2)[1] != strings.SplitN(first, "\n", 2)[1] {
					t.Fatalf("seed %d: the replay differs:\n%s\nfirst:\n%s", seed, got, first)
				}
				if !strings.Contains(first, "register 1: <nil>") || !strings.Contains(first, "fork 2: child has") {
					t.Fatalf("seed %d: the scenario did not complete:\n%s", seed, first)
				}
			}
		})
	}
}

// BenchmarkDetRegVsFork measures scheduling decisions per second of the
// registration-vs-fork scenario (20 registrations, 30 forks), timing only
// the runs, not building the model (run it with GOMAXPROCS=1 for one core).
func BenchmarkDetRegVsFork(b *testing.B) {
	decisions := 0
	seed := uint64(0)
	var elapsed, cpu time.Duration
	for b.Loop() {
		seed++
		b.StopTimer()
		run := newRegVsFork(b, kernel.DesignAfter, seed, nil, 20, 30)
		b.StartTimer()
		t0, c0 := time.Now(), processCPU()
		_, rec, err := run()
		elapsed += time.Since(t0)
		cpu += processCPU() - c0
		if err != nil {
			b.Fatal(err)
		}
		decisions += len(rec.Decisions)
	}
	b.ReportMetric(float64(decisions)/elapsed.Seconds(), "decisions/s")
	// Per second of CPU time, which a loaded host does not blur.
	b.ReportMetric(float64(decisions)/cpu.Seconds(), "decisions/cpu-s")
	b.ReportMetric(float64(decisions)/float64(b.N), "decisions/run")
}

// processCPU returns the CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
