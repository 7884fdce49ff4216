package sched_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"mmlab/locking"
	"mmlab/sched"
)

const ms = time.Millisecond

func simSystem(cpus int, until time.Duration, p sched.Preempt) *sched.System {
	return sched.New(sched.Config{CPUs: cpus, Seed: 1, Sim: &sched.SimConfig{Until: until, HZ: 250, Preempt: p, Costs: sched.SimCosts{PopulatePage: ms}}})
}

// TestSimWorkedCase is machines.md §4's worked case on one CPU at HZ=250
// (base slice 0.70 ms): a nice-15 task beside a nice-0 hog.
//   - New, it has lag 0 and no wake-up preemption (WF_FORK): the hog runs
//     until its first request (half a slice, PLACE_DEADLINE_INITIAL) has
//     ended, which the tick at 4 ms notices; V is then below the hog's
//     vruntime and the nice-15 task runs, at 4 ms.
//   - It runs 0.1 ms (2844444 ns of vruntime), below V: it sleeps with
//     positive lag (eligible, so not delayed) and wakes 5.5 ms later, at 9.6
//     ms, with the lag inflated by place_entity: the hog is no longer
//     eligible, the wakee is the pick, so it preempts the hog at once.
//
// With the hog in user mode every model preempts it at the wake-up's
// interrupt return (lazy too: exit to user honours both flags). In kernel
// code, full preempts at once; lazy sets TIF_NEED_RESCHED_LAZY, promoted at
// the next tick (so the task first runs at 8 ms, wakes at 13.6 ms and
// runs at 16 ms); none waits for a preemption point the hog never reaches,
// and At is not one under none; under voluntary it is (might_resched()),
// so the wakee runs at the hog's next At, 10.1 ms (the hog's Ats fall at
// 4.1 ms + k ms). A cond_resched() after each of the hog's 1 ms pages is
// one under none and voluntary, so it runs at the tick's page end and at
// the next page end after the wake-up, as under voluntary with At; under
// lazy it is none (cond_resched() is off there), as in kernel code.
func TestSimWorkedCase(t *testing.T) {
	const (
		user   = iota // the hog spins in user mode
		kernel        // in kernel code without a preemption point
		points        // in kernel code with an At every millisecond
		pages         // in kernel code with a cond_resched() every millisecond

		run, sleep = 100 * time.Microsecond, 5500 * time.Microsecond
	)
	for _, c := range []struct {
		preempt     sched.Preempt
		hog         int
		first, wait time.Duration // -1: not before the run's end
	}{
		{sched.PreemptNone, user, 4 * ms, 0},
		{sched.PreemptVoluntary, user, 4 * ms, 0},
		{sched.PreemptFull, user, 4 * ms, 0},
		{sched.PreemptLazy, user, 4 * ms, 0},
		{sched.PreemptFull, kernel, 4 * ms, 0},
		{sched.PreemptLazy, kernel, 8 * ms, 16*ms - (8*ms + run + sleep)},
		{sched.PreemptNone, kernel, -1, -1},
		{sched.PreemptNone, points, -1, -1},
		{sched.PreemptVoluntary, points, 4 * ms, 10*ms + run - (4*ms + run + sleep)},
		{sched.PreemptNone, pages, 4 * ms, 10*ms + run - (4*ms + run + sleep)},
		{sched.PreemptVoluntary, pages, 4 * ms, 10*ms + run - (4*ms + run + sleep)},
		{sched.PreemptLazy, pages, 8 * ms, 16*ms - (8*ms + run + sleep)},
	} {
		name := fmt.Sprintf("%v/hog%d", c.preempt, c.hog)
		sys := simSystem(1, 30*ms, c.preempt)
		first, wait := time.Duration(-1), time.Duration(-1)
		sys.SpawnNamed("hog", 0, 0, func(*sched.Thread) {
			for {
				switch c.hog {
				case user:
					sched.ChargeUser(time.Second)
				case kernel:
					sched.Charge(time.Second)
				case points:
					sched.Charge(ms)
					sched.At("might_resched", "")
				case pages:
					sched.ChargeCostCondResched(sched.CostPopulatePage, 1000)
				}
			}
		})
		sys.SpawnNamed("nice15", 0, 15, func(*sched.Thread) {
			first = sched.Since(sched.Epoch)
			sched.ChargeUser(run)
			due := sched.Now().Add(sleep)
			sched.Sleep(sleep)
			wait = sched.Since(due)
		})
		rec, err := sys.Run()
		if err != nil || !rec.TimeLimit || rec.End != 30*ms {
			t.Fatalf("%s: run: %v, time limit %v, end %v", name, err, rec.TimeLimit, rec.End)
		}
		if first != c.first || wait != c.wait {
			t.Errorf("%s: first run at %v, wait after the wake-up %v; want %v, %v", name, first, wait, c.first, c.wait)
		}
	}
}

// TestSimLocks: threads on two CPUs, two of them unpinned, contend for a
// sleeping lock; the run ends when all exit, no earlier in virtual time
// than the critical sections take serialised, and the same seed gives the
// same run.
func TestSimLocks(t *testing.T) {
	run := func(seed uint64) (time.Duration, []int) {
		sys := sched.New(sched.Config{CPUs: 2, Seed: seed, Sim: &sched.SimConfig{Until: time.Second}})
		var mu locking.Mutex
		var order []int
		for i := range 4 {
			th := sys.SpawnNamed(fmt.Sprint("w", i), i%2, 0, func(th *sched.Thread) {
				for range 50 {
					mu.Lock()
					order = append(order, i)
					sched.Charge(10 * time.Microsecond)
					mu.Unlock()
					sched.ChargeUser(15 * time.Microsecond)
				}
			})
			if i >= 2 {
				th.SetAffinity()
			}
		}
		rec, err := sys.Run()
		if err != nil || rec.TimeLimit {
			t.Fatalf("seed %d: %v, time limit %v", seed, err, rec.TimeLimit)
		}
		return rec.End, order
	}
	end, order := run(7)
	if len(order) != 200 || end < 200*10*time.Microsecond {
		t.Fatalf("%d critical sections, end %v", len(order), end)
	}
	end2, order2 := run(7)
	if end2 != end || !slices.Equal(order, order2) {
		t.Errorf("seed 7 twice: end %v vs %v, orders equal %v", end, end2, slices.Equal(order, order2))
	}
}

// TestSimDeadlock: an AB-BA lock order ends the run with a DeadlockError
// naming the cycle.
func TestSimDeadlock(t *testing.T) {
	sys := simSystem(2, time.Second, sched.PreemptNone)
	var a, b locking.Mutex
	sys.SpawnNamed("ab", 0, 0, func(*sched.Thread) {
		a.Lock()
		sched.Charge(ms)
		b.Lock()
	})
	sys.SpawnNamed("ba", 1, 0, func(*sched.Thread) {
		b.Lock()
		sched.Charge(ms)
		a.Lock()
	})
	_, err := sys.Run()
	var d *sched.DeadlockError
	if !errors.As(err, &d) {
		t.Fatalf("err %v, want a deadlock", err)
	}
}

// TestSimRT: a SCHED_FIFO thread that wakes every millisecond runs at once
// beside a fair hog, and is never preempted by it.
func TestSimRT(t *testing.T) {
	sys := simSystem(1, 50*ms, sched.PreemptNone)
	sys.SpawnNamed("hog", 0, -20, func(*sched.Thread) {
		for {
			sched.ChargeUser(time.Second)
		}
	})
	var waits []time.Duration
	rt := sys.SpawnNamed("fifo", 0, 0, func(th *sched.Thread) {
		for {
			sched.ChargeUser(6 * ms) // longer than a tick: no tick preempts it
			due := sched.Now().Add(ms)
			sched.Sleep(ms)
			waits = append(waits, sched.Since(due))
		}
	})
	rt.SetPolicy(sched.PolicyFIFO, 50)
	if _, err := sys.Run(); err != nil {
		t.Fatal(err)
	}
	if _, inv := rt.Switches(); len(waits) != 7 || slices.Max(waits) != 0 || inv != 0 {
		t.Errorf("waits %v, involuntary switches %d", waits, inv)
	}
}

// TestSimNanosleep: a fair thread's nanosleep ends its timer slack after
// its length, an RT thread's at its length (its slack is 0); outside sim
// mode the slack is not added.
func TestSimNanosleep(t *testing.T) {
	sys := simSystem(2, 10*ms, sched.PreemptNone)
	var fair, fifo time.Duration
	sys.SpawnNamed("fair", 0, 0, func(*sched.Thread) {
		t0 := sched.Now()
		sched.Nanosleep(ms)
		fair = sched.Since(t0)
	})
	rt := sys.SpawnNamed("fifo", 1, 0, func(*sched.Thread) {
		t0 := sched.Now()
		sched.Nanosleep(ms)
		fifo = sched.Since(t0)
	})
	rt.SetPolicy(sched.PolicyFIFO, 50)
	if _, err := sys.Run(); err != nil {
		t.Fatal(err)
	}
	if want := ms + sched.TimerSlack; fair != want {
		t.Errorf("fair thread slept %v, want %v", fair, want)
	}
	if fifo != ms {
		t.Errorf("FIFO thread slept %v, want %v", fifo, ms)
	}
	det := sched.New(sched.Config{CPUs: 1, Deterministic: true, Seed: 1})
	var slept time.Duration
	det.Spawn(0, 0, func(*sched.Thread) {
		t0 := sched.Now()
		sched.Nanosleep(ms)
		slept = sched.Since(t0)
	})
	if _, err := det.Run(); err != nil {
		t.Fatal(err)
	}
	if slept != ms {
		t.Errorf("deterministic run: slept %v, want %v", slept, ms)
	}
}

// TestSimPlacement: an unpinned thread that wakes while its CPU is busy
// moves to the idle one (select_idle_sibling); a pinned one stays.
func TestSimPlacement(t *testing.T) {
	sys := simSystem(2, 20*ms, sched.PreemptNone)
	sys.SpawnNamed("hog", 0, 0, func(*sched.Thread) {
		for {
			sched.ChargeUser(time.Second)
		}
	})
	var cpus [2][]int
	for i := range 2 {
		th := sys.SpawnNamed(fmt.Sprint("sleeper", i), 0, 0, func(th *sched.Thread) {
			for range 3 {
				sched.Sleep(ms)
				cpus[i] = append(cpus[i], th.CPU())
				sched.ChargeUser(10 * time.Microsecond)
			}
		})
		if i == 1 {
			th.SetAffinity(0, 1)
		}
	}
	if _, err := sys.Run(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cpus[0], []int{0, 0, 0}) || !slices.Equal(cpus[1], []int{1, 1, 1}) {
		t.Errorf("CPUs after each wake-up: pinned %v, unpinned %v", cpus[0], cpus[1])
	}
}

// TestSimClock: Now, Since and ThreadCPUTime are virtual.
func TestSimClock(t *testing.T) {
	sys := simSystem(1, time.Second, sched.PreemptNone)
	var slept, cpu time.Duration
	sys.SpawnNamed("t", 0, 0, func(*sched.Thread) {
		t0 := sched.Now()
		sched.Sleep(5 * ms)
		sched.ChargeUser(3 * ms)
		slept = sched.Since(t0)
		cpu, _ = sched.ThreadCPUTime()
	})
	rec, err := sys.Run()
	if err != nil || slept != 8*ms || cpu != 3*ms || rec.End != 8*ms || rec.TimeLimit {
		t.Errorf("err %v, since %v, cpu %v, end %v", err, slept, cpu, rec.End)
	}
}

// nice15Waits runs the scheduler target's case on CPU 0 of a machine of
// ncpus CPUs (whose count sets the base slice) at HZ=250: a nice-0 task
// that spins 2 ms and sleeps 1 ms, and a nice-15 task that runs 100 µs and
// sleeps a seeded 0.5..4.5 ms (a model choice: the target does not say
// what it does), for d of virtual time; it returns the nice-15 task's
// waits from wake-up to running.
func nice15Waits(ncpus int, d time.Duration, seed uint64, p sched.Preempt) []time.Duration {
	sys := sched.New(sched.Config{CPUs: ncpus, Seed: seed, Sim: &sched.SimConfig{Until: d, HZ: 250, Preempt: p}})
	sys.SpawnNamed("spin", 0, 0, func(*sched.Thread) {
		for {
			sched.ChargeUser(2 * ms)
			sched.Sleep(ms)
		}
	})
	rng := rand.New(rand.NewPCG(seed, 15))
	var waits []time.Duration
	sys.SpawnNamed("nice15", 0, 15, func(*sched.Thread) {
		for {
			sched.ChargeUser(100 * time.Microsecond)
			s := 500*time.Microsecond + time.Duration(rng.Int64N(int64(4*ms)))
			due := sched.Now().Add(s)
			sched.Sleep(s)
			waits = append(waits, sched.Since(due))
		}
	})
	if _, err := sys.Run(); err != nil {
		panic(err)
	}
	return waits
}

func quantiles(ws []time.Duration) string {
	ws = slices.Clone(ws)
	slices.Sort(ws)
	q := func(f float64) time.Duration { return ws[int(f*float64(len(ws)-1))] }
	zero := 0
	for _, w := range ws {
		if w == 0 {
			zero++
		}
	}
	return fmt.Sprintf("n=%d zero=%.0f%% p10=%v p50=%v p90=%v p99=%v max=%v", len(ws), 100*float64(zero)/float64(len(ws)), q(.1), q(.5), q(.9), q(.99), ws[len(ws)-1])
}

// TestSimNice15Wait prints the distribution of the target case's waits
// on one CPU of a 1-CPU machine (base slice 0.70 ms) and of a 2-CPU one
// like this host (1.40 ms), for each preemption model (comparing it with a
// live sched_switch trace is not done here).
func TestSimNice15Wait(t *testing.T) {
	for _, ncpus := range []int{1, 2} {
		for _, p := range []sched.Preempt{sched.PreemptNone, sched.PreemptFull, sched.PreemptLazy} {
			ws := nice15Waits(ncpus, 10*time.Second, 1, p)
			t.Logf("%d CPUs, preempt %v, 10 s simulated: %s", ncpus, p, quantiles(ws))
			if len(ws) < 1000 {
				t.Errorf("only %d wake-ups", len(ws))
			}
		}
	}
}

// BenchmarkSimNice15 measures sim mode's speed: simulated time per host
// second, on the target case.
func BenchmarkSimNice15(b *testing.B) {
	start := time.Now()
	for range b.N {
		nice15Waits(1, time.Second, 1, sched.PreemptNone)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "sim-s/host-s")
}

// BenchmarkSimHandoff: two busy CPUs whose threads charge 1 µs at a time,
// so that their clocks leapfrog and every charge ends in a host hand-off:
// the cost of one, and the simulated time per host second it allows.
func BenchmarkSimHandoff(b *testing.B) {
	sys := sched.New(sched.Config{CPUs: 2, Seed: 1, Sim: &sched.SimConfig{Until: time.Duration(b.N) * time.Microsecond}})
	for i := range 2 {
		sys.SpawnNamed(fmt.Sprint("t", i), i, 0, func(*sched.Thread) {
			for {
				sched.ChargeUser(time.Microsecond)
				sched.At("point", "")
			}
		})
	}
	b.ResetTimer()
	start := time.Now()
	if _, err := sys.Run(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)*1e-6/time.Since(start).Seconds(), "sim-s/host-s")
}

// BenchmarkSimPoint: Points of one thread, the fast path that neither
// hands off nor ticks.
func BenchmarkSimPoint(b *testing.B) {
	sys := sched.New(sched.Config{CPUs: 1, Seed: 1, Sim: &sched.SimConfig{Until: time.Hour}})
	sys.SpawnNamed("t", 0, 0, func(th *sched.Thread) {
		for range b.N {
			th.Point()
		}
	})
	b.ResetTimer()
	if _, err := sys.Run(); err != nil {
		b.Fatal(err)
	}
}

// TestSimRR: two SCHED_RR threads of one priority share a CPU in
// RR_TIMESLICE turns (100 ms, counted in ticks).
func TestSimRR(t *testing.T) {
	sys := simSystem(1, 450*ms, sched.PreemptNone)
	var turns []string
	last := ""
	for _, name := range []string{"a", "b"} {
		th := sys.SpawnNamed(name, 0, 0, func(*sched.Thread) {
			for {
				if last != name {
					last = name
					turns = append(turns, fmt.Sprintf("%s@%v", name, sched.Since(sched.Epoch)))
				}
				sched.ChargeUser(ms)
			}
		})
		th.SetPolicy(sched.PolicyRR, 10)
	}
	if _, err := sys.Run(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a@0s", "b@100ms", "a@200ms", "b@300ms", "a@400ms"}; !slices.Equal(turns, want) {
		t.Errorf("turns %v, want %v", turns, want)
	}
}

// TestSimManyCPUs: 128 CPUs, 256 unpinned threads that sleep and wake:
// every CPU runs some of them.
func TestSimManyCPUs(t *testing.T) {
	sys := simSystem(sched.MaxSimCPUs, 50*ms, sched.PreemptFull)
	ran := make([]bool, sched.MaxSimCPUs)
	for i := range 2 * sched.MaxSimCPUs {
		th := sys.SpawnNamed(fmt.Sprint("t", i), 0, i%40-20, func(th *sched.Thread) {
			for n := 0; ; n++ {
				ran[th.CPU()] = true
				sched.ChargeUser(time.Duration(50+i%7*30) * time.Microsecond)
				sched.Sleep(time.Duration(100+n%5*100) * time.Microsecond)
			}
		})
		th.SetAffinity()
	}
	rec, err := sys.Run()
	if err != nil || !rec.TimeLimit {
		t.Fatal(err)
	}
	if i := slices.Index(ran, false); i >= 0 {
		t.Errorf("CPU %d never ran a thread", i)
	}
}

// The costs of SimConfig: ChargeCost's events, instructions in
// picoseconds (of user code and of kernel software), a context switch
// charged to the incoming thread, and a wake-up's latency onto an idle
// CPU.
func TestSimCosts(t *testing.T) {
	costs := sched.SimCosts{Int3: 300, Syscall: 100, ContextSwitch: 1000, Wakeup: 5000, KernelInstructionPS: 550}
	sys := sched.New(sched.Config{CPUs: 2, Seed: 1, Sim: &sched.SimConfig{Until: ms, HZ: 250, InstructionPS: 400, Costs: costs}})
	var got []string
	note := func(format string, args ...any) { got = append(got, fmt.Sprintf(format, args...)) }
	ch := make(chan struct{}, 1)
	var a *sched.Thread
	a = sys.SpawnNamed("a", 0, 0, func(*sched.Thread) {
		sched.ChargeCost(sched.CostInt3, 2)
		note("a after two int3 at %v", sched.Since(sched.Epoch))
		sched.ChargeKernelInstructions(1001) // 550.55 ns: 551
		note("a after 1001 kernel instructions at %v", sched.Since(sched.Epoch))
		for range 5 {
			a.Point() // 5 x 400 ps: 2 ns
		}
		note("a after five instructions at %v", sched.Since(sched.Epoch))
		sched.Notify(ch)
		a.Yield() // to b: b pays the switch
		note("a again at %v", sched.Since(sched.Epoch))
	})
	sys.SpawnNamed("b", 0, 0, func(*sched.Thread) {
		note("b first at %v", sched.Since(sched.Epoch))
	})
	sys.SpawnNamed("c", 1, 0, func(*sched.Thread) {
		sched.Wait(nil, "ch", ch, nil)
		note("c woken at %v", sched.Since(sched.Epoch))
	})
	if _, err := sys.Run(); err != nil {
		t.Fatal(err)
	}
	want := []string{"a after two int3 at 600ns", "a after 1001 kernel instructions at 1.151µs", "a after five instructions at 1.153µs",
		"b first at 2.153µs", "a again at 3.153µs", "c woken at 6.153µs"}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// A fork's cost is drawn from ForkSamples where the machine has them, one
// sample per fork by the run's seed (the same seed, the same draws), and
// is Fork otherwise; the other events keep their fixed costs.
func TestSimForkSamples(t *testing.T) {
	run := func(costs sched.SimCosts, seed uint64) []time.Duration {
		var got []time.Duration
		sys := sched.New(sched.Config{CPUs: 1, Seed: seed, Sim: &sched.SimConfig{Until: ms, HZ: 250, Costs: costs}})
		sys.SpawnNamed("f", 0, 0, func(*sched.Thread) {
			for range 40 {
				t0 := sched.Now()
				sched.ChargeCost(sched.CostFork, 1)
				got = append(got, sched.Since(t0))
			}
			t0 := sched.Now()
			sched.ChargeCost(sched.CostSyscall, 1)
			got = append(got, sched.Since(t0))
		})
		if _, err := sys.Run(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	samples := []time.Duration{1 * time.Microsecond, 3 * time.Microsecond, 40 * time.Microsecond}
	drawn := run(sched.SimCosts{Fork: 7 * time.Microsecond, Syscall: 100, ForkSamples: samples}, 1)
	seen := map[time.Duration]int{}
	for _, d := range drawn[:40] {
		seen[d]++
	}
	if len(seen) != len(samples) || seen[1*time.Microsecond] == 0 || seen[3*time.Microsecond] == 0 || seen[40*time.Microsecond] == 0 || drawn[40] != 100 {
		t.Errorf("forks cost %v (want only and all of %v), then a syscall %v", seen, samples, drawn[40])
	}
	if again := run(sched.SimCosts{Fork: 7 * time.Microsecond, Syscall: 100, ForkSamples: samples}, 1); !slices.Equal(again, drawn) {
		t.Errorf("the same seed drew %v, then %v", drawn, again)
	}
	fixed := run(sched.SimCosts{Fork: 7 * time.Microsecond, Syscall: 100}, 1)
	for _, d := range fixed[:40] {
		if d != 7*time.Microsecond {
			t.Fatalf("without samples a fork cost %v, want Fork's 7µs", d)
		}
	}
}

// A busy CPU loses the noise's interruptions, an idle one none: with
// interruptions of 10 µs at 10,000 a second, 10 ms of kernel work and
// waits on memory ends later by a whole number of them, about a hundred; a thread that sleeps
// 10 ms on the other CPU meanwhile wakes on time; NoiseTime counts the
// worker's lost time and none of the sleeper's; the same seed gives the
// same run, and a machine without noise charges the work exactly.
func TestSimNoise(t *testing.T) {
	const blip = 10 * time.Microsecond
	var lost, sleeperLost time.Duration
	run := func(seed uint64, noise sched.SimNoise) (work, sleep time.Duration) {
		sys := sched.New(sched.Config{CPUs: 2, Seed: seed, Sim: &sched.SimConfig{Until: time.Second, Noise: noise}})
		sys.SpawnNamed("work", 0, 0, func(*sched.Thread) {
			sched.Charge(5 * ms)
			sched.Stall(5 * ms) // a wait on memory is interrupted too
			work = sched.Since(sched.Epoch)
			lost, _ = sched.NoiseTime()
		})
		sys.SpawnNamed("sleeper", 1, 0, func(*sched.Thread) {
			sched.Sleep(10 * ms)
			sleep = sched.Since(sched.Epoch)
			sleeperLost, _ = sched.NoiseTime()
		})
		if _, err := sys.Run(); err != nil {
			t.Fatal(err)
		}
		return work, sleep
	}
	noise := sched.SimNoise{PerSecond: 10000, Durations: []time.Duration{blip}}
	work, sleep := run(1, noise)
	if n := (work - 10*ms) / blip; (work-10*ms)%blip != 0 || n < 70 || n > 130 {
		t.Errorf("10 ms of work ended at %v: %v interruptions of %v, want a whole number near 100 (some 50 in each half)", work, float64(work-10*ms)/float64(blip), blip)
	}
	if sleep != 10*ms {
		t.Errorf("a 10 ms sleep on an idle CPU ended at %v", sleep)
	}
	if lost != work-10*ms || sleeperLost != 0 {
		t.Errorf("NoiseTime: the worker lost %v (its work ended %v late), the sleeper %v", lost, work-10*ms, sleeperLost)
	}
	if d, ok := sched.NoiseTime(); d != 0 || ok {
		t.Errorf("NoiseTime outside a sim run: %v, %v", d, ok)
	}
	if again, _ := run(1, noise); again != work {
		t.Errorf("the same seed: work ended at %v, then at %v", work, again)
	}
	if quiet, _ := run(1, sched.SimNoise{}); quiet != 10*ms {
		t.Errorf("without noise: work ended at %v", quiet)
	}
}

// TestSimPostIdle: a CPU's first kernel work after an idle pays
// SimCosts.PostIdle's extra for that idle (interpolated, the last point's
// beyond the last), once; work after a return to user, and work on a CPU
// that was never idle in between, pays none.
func TestSimPostIdle(t *testing.T) {
	const us = time.Microsecond
	points := []sched.IdleCost{{Idle: 50 * us, Extra: 1000}, {Idle: 250 * us, Extra: 4000}}
	costs := sched.SimCosts{Syscall: 100, KernelInstructionPS: 1000, PostIdle: points}
	sys := sched.New(sched.Config{CPUs: 2, Seed: 1, Sim: &sched.SimConfig{Until: 10 * ms, HZ: 250, InstructionPS: 1000, Costs: costs}})
	type step struct {
		name  string
		sleep time.Duration
		user  bool // a return to user before the syscall
		want  time.Duration
	}
	steps := []step{
		{"first charge of the run", 0, false, 100},
		{"after 150µs idle", 150 * us, false, 100 + 2500},
		{"the second charge", 0, false, 100},
		{"after 25µs idle", 25 * us, false, 100 + 500},
		{"after 1ms idle, past the last point", ms, false, 100 + 4000},
		{"after a return to user", 100 * us, true, 100},
	}
	var got []time.Duration
	sys.SpawnNamed("sleeper", 0, 0, func(*sched.Thread) {
		for _, s := range steps {
			if s.sleep > 0 {
				sched.Sleep(s.sleep)
			}
			if s.user {
				sched.ReturnToUser()
			}
			t0 := sched.Now()
			sched.ChargeCost(sched.CostSyscall, 1)
			got = append(got, sched.Since(t0))
		}
		// A kernel instruction pays it too.
		sched.Sleep(50 * us)
		t0 := sched.Now()
		sched.KernelInstruction()
		got = append(got, sched.Since(t0))
	})
	// Two threads taking turns on CPU 1: it is never idle between them.
	var turns []time.Duration
	for i := range 2 {
		sys.SpawnNamed(fmt.Sprintf("turn%d", i), 1, 0, func(th *sched.Thread) {
			for range 3 {
				t0 := sched.Now()
				sched.ChargeCost(sched.CostSyscall, 1)
				turns = append(turns, sched.Since(t0))
				th.Yield()
			}
		})
	}
	if _, err := sys.Run(); err != nil {
		t.Fatal(err)
	}
	for i, s := range steps {
		if i >= len(got) || got[i] != s.want {
			t.Errorf("%s: the syscall took %v, want %v (all: %v)", s.name, got[min(i, len(got)-1)], s.want, got)
		}
	}
	if n := len(steps); len(got) != n+1 || got[n] != 1+1000 {
		t.Errorf("a kernel instruction after 50µs idle took %v, want 1ns + 1µs", got[n:])
	}
	if len(turns) != 6 || slices.Max(turns) != 100 {
		t.Errorf("threads taking turns on a busy CPU: syscalls took %v, want 100ns each", turns)
	}
}
