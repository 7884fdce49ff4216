package smp_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"mmlab/machine"
	"mmlab/sched"
	"mmlab/smp"
)

// ticketLock is the x86 ticket spinlock of Linux before queued spinlocks
// (arch/x86/include/asm/spinlock.h, v3.x: arch_spin_lock()'s xadd on
// tickets.tail, the spin on tickets.head, arch_spin_unlock()'s plain add
// to head): both halves on one line.
type ticketLock struct {
	line       smp.Line
	head, tail smp.Uint32
}

// newTicketLock returns a ticket lock, its two halves on one line, or
// (split) each on a line of its own: a variant in which a newcomer's xadd
// does not invalidate the spinners' copies of head.
func newTicketLock(split bool) *ticketLock {
	l := &ticketLock{}
	l.line.SetName("ticket_lock")
	l.head.InitOn(&l.line, "tickets.head")
	if split {
		l.tail.Init("tickets.tail")
	} else {
		l.tail.InitOn(&l.line, "tickets.tail")
	}
	return l
}

func (l *ticketLock) lock() {
	me := l.tail.Add(1) - 1
	for l.head.Load() != me {
		sched.Relax("ticket_spin")
	}
}

func (l *ticketLock) unlock() { l.head.Store(l.head.Load() + 1) }

// pauseCycles is the latency of PAUSE, the x86 cpu_relax() of the spin in
// arch_spin_lock(), on Skylake-SP: "as many as 140 cycles" (Intel 64 and
// IA-32 Architectures Optimization Reference Manual, as
// ../shared/research/machines.md §1(a) quotes it).
const pauseCycles = 140

// ticketRun runs n sim CPUs of machine d that each take the lock, hold it
// for serial, release it and work parallel outside it, for span of
// virtual time; it returns the acquisitions per µs. A spinner's turn
// costs one PAUSE at d's clock.
func ticketRun(t *testing.T, d machine.Description, n int, split bool, serial, parallel, span time.Duration) float64 {
	t.Helper()
	pause := time.Duration(pauseCycles / d.Clock.GHz)
	sys := sched.New(sched.Config{CPUs: n, Seed: 1, Sim: &sched.SimConfig{Until: span, Machine: &d, RelaxCost: pause}})
	l := newTicketLock(split)
	var acquired int
	for cpu := range n {
		// The model's sections are exponential (its rates are memoryless):
		// so are these, from a generator of the CPU's own.
		rng := rand.New(rand.NewPCG(uint64(cpu), 1))
		exp := func(mean time.Duration) time.Duration { return time.Duration(rng.ExpFloat64() * float64(mean)) }
		sys.SpawnNamed(fmt.Sprintf("cpu%d", cpu), cpu, 0, func(*sched.Thread) {
			for {
				l.lock()
				sched.Charge(exp(serial))
				acquired++ // one thread runs at a time
				l.unlock()
				sched.Charge(exp(parallel))
			}
		})
	}
	if _, err := sys.Run(); err != nil {
		t.Fatal(err)
	}
	return float64(acquired) / (float64(span) / float64(time.Microsecond))
}

// markovSpeedup is Boyd-Wickizer, Kaashoek, Morris and Zeldovich's model
// of a ticket lock ("Non-scalable locks are dangerous", Linux Symposium
// 2012, section 3): states k = 0..n cores holding or waiting for the
// lock, arrivals (n-k)/a from state k, service 1/(s + c·k/2) in state k
// (the next holder is on average k/2 deep in the serialised re-reads of
// the line after a release); the steady state P_k·(n-k)/a =
// P_{k+1}/(s + c·(k+1)/2) gives the acquisitions per unit time, and the
// speedup is that times a+s, one core's cycle.
func markovSpeedup(n int, a, s, c float64) float64 {
	p := []float64{1}
	for k := range n {
		p = append(p, p[k]*float64(n-k)/a*(s+c*float64(k+1)/2))
	}
	var z, x float64
	for _, v := range p {
		z += v
	}
	for k := 1; k <= n; k++ {
		x += p[k] / z / (s + c*float64(k)/2)
	}
	return x * (a + s)
}

func peak(v []float64) int {
	best := 0
	for i := range v {
		if v[i] > v[best] {
			best = i
		}
	}
	return best + 1
}

// TestTicketLockCollapse prints a ticket lock's throughput in sim beside
// the Markov model's prediction for the machine's transfer cost and the
// same critical and parallel sections, in two settings, and checks where
// the sim collapses. CPUs 1..20 of xeon-gold-6138-2s are the cores of
// socket 0, so every transfer is LineLLC (the model's c).
//
// The model charges a hand-off as the next holder's place in the re-reads
// after a release, c·k/2, and leaves out the rest of them: the next
// release's store queues behind every re-read still in flight, and each
// arrival's xadd invalidates the waiters' copies again, a second storm of
// re-reads. A long serial section hides both: with s = 1 µs (21c) the sim
// must peak within one CPU of the model. A short one does not: with
// s = 100 ns (2c) the sim must still collapse (peak, then fall below half
// the peak by 20 CPUs), and earlier than the model, as the paper found of
// real machines.
func TestTicketLockCollapse(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("80 sim runs")
	}
	d := machine.MustNamed("xeon-gold-6138-2s")
	const (
		span    = 2 * time.Millisecond
		maxCPUs = 20
	)
	c := d.Costs.LineLLC.NS
	for _, set := range []struct {
		name             string
		serial, parallel time.Duration
	}{
		{"long serial section", time.Microsecond, 10 * time.Microsecond},
		{"short serial section", 100 * time.Nanosecond, 2 * time.Microsecond},
	} {
		var sim, split, model []float64
		var b strings.Builder
		fmt.Fprintf(&b, "ticket lock on %s, %s: s=%v a=%v (exponential) c=%.1f ns (line_llc)\n%4s %12s %12s %14s %12s\n", d.Name, set.name, set.serial, set.parallel, c,
			"CPUs", "sim acq/µs", "sim speedup", "split speedup", "model")
		for n := 1; n <= maxCPUs; n++ {
			sim = append(sim, ticketRun(t, d, n, false, set.serial, set.parallel, span))
			split = append(split, ticketRun(t, d, n, true, set.serial, set.parallel, span))
			model = append(model, markovSpeedup(n, float64(set.parallel), float64(set.serial), c))
			fmt.Fprintf(&b, "%4d %12.3f %12.2f %14.2f %12.2f\n", n, sim[n-1], sim[n-1]/sim[0], split[n-1]/split[0], model[n-1])
		}
		ps, pm := peak(sim), peak(model)
		fmt.Fprintf(&b, "peak: sim %d CPUs, split %d CPUs, model %d CPUs", ps, peak(split), pm)
		t.Log(b.String())
		if set.serial >= time.Microsecond {
			if ps < pm-1 || ps > pm+1 {
				t.Errorf("%s: sim peaks at %d CPUs, the model at %d: want within one CPU", set.name, ps, pm)
			}
			continue
		}
		if ps == maxCPUs || sim[maxCPUs-1] > sim[ps-1]/2 {
			t.Errorf("%s: sim does not collapse: peak at %d CPUs, %d CPUs at %.2f of it", set.name, ps, maxCPUs, sim[maxCPUs-1]/sim[ps-1])
		}
		if ps >= pm {
			t.Errorf("%s: sim peaks at %d CPUs, the model at %d: want earlier (the re-reads the model leaves out)", set.name, ps, pm)
		}
	}
}
