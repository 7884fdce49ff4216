package refscale

import (
	"context"
	"fmt"
	"strings"
	"time"

	"mmlab/experiment"
	"mmlab/kernel"
	"mmlab/locking"
	"mmlab/rcu"
	"mmlab/sched"
	"mmlab/smp"
)

// section is one read-side critical section of a scale type, entered and
// left by the reader r.
type section func(r *kernel.Runner)

// newSection returns typ's critical section on primitives of its own on
// machine m: refscale's ops->init() (ref_rwsem_init(), the static
// srcu_struct) and ops->readsection()'s loop body.
func newSection(typ string, m *kernel.Machine) section {
	switch typ {
	case TypeRefcnt:
		refcnt := new(smp.Int32)
		refcnt.Init("refscale.refcnt")
		return func(*kernel.Runner) { refcnt.Add(1); refcnt.Add(-1) }
	case TypeRWSem:
		s := locking.NewRWSem("refscale.test_rwsem")
		return func(r *kernel.Runner) { s.DownRead(r); s.UpRead() }
	case TypePercpuRWSem:
		s := locking.NewPercpuRWSem("refscale.percpu_rwsem", m.Sys.NumCPU())
		return func(r *kernel.Runner) { s.DownRead(r); s.UpRead(r) }
	case TypeSRCU:
		s := rcu.NewSRCU(m.Sys)
		return func(r *kernel.Runner) { t := r.Thread(); s.ReadUnlock(t, s.ReadLock(t)) }
	case TypeRCUTrace:
		s := rcu.NewTasksTrace(m.Sys)
		return func(r *kernel.Runner) { t := r.Thread(); s.ReadUnlock(t, s.ReadLock(t)) }
	case TypeRCU:
		return func(r *kernel.Runner) { t := r.Thread(); rcu.ReadUnlock(t, rcu.ReadLock(t)) }
	}
	panic("refscale: unknown scale type " + typ)
}

// readSection is refscale's ops->readsection(loops): loops+1 critical
// sections (`for (i = nloops; i >= 0; i--)`), the loop's back edge an
// instruction of kernel code: in a sim run it is where the other CPUs'
// clocks catch up (sched.KernelInstruction), so that the readers' accesses
// interleave in virtual time; in real time a preemption point.
func readSection(r *kernel.Runner, sec section, loops int) {
	t := r.Thread()
	sim := t.Sim()
	for i := loops; i >= 0; i-- {
		sec(r)
		if sim {
			sched.KernelInstruction()
		} else {
			t.Point()
		}
	}
}

// point is the experiment's state for one (type, readers) pair: one
// machine of readers CPUs and the primitive under test.
type point struct {
	m       *kernel.Machine
	sec     section
	readers int
	loops   int
	// The check-in counters of ref_scale_reader(): n_started, n_warmedup,
	// n_cooleddown.
	started, warmed, cooled smp.Int32
	durations               []time.Duration // rt->last_duration_ns, per reader
}

// run is one experiment of main_func(): every reader started, each
// reader's timed loop, and the figure: 1000 * sum / (nreaders * loops) in
// picoseconds there, sum / (readers * loops) in nanoseconds here.
func (p *point) run(ctx context.Context) (float64, error) {
	p.started.Store(int32(p.readers))
	p.warmed.Store(int32(p.readers))
	p.cooled.Store(int32(p.readers))
	var runners []*kernel.Runner
	for i := range p.readers {
		task := p.m.NewTask(fmt.Sprintf("ref_scale_reader/%d", i))
		runners = append(runners, p.m.Start(task, i, 0, func(r *kernel.Runner) { p.reader(r, i) }))
	}
	for _, r := range runners {
		r.Wait()
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, d := range p.durations {
		sum += d
	}
	return float64(sum) / float64(p.readers*p.loops), nil
}

// reader is ref_scale_reader()'s body for one experiment. refscale checks
// in with `if (!atomic_dec_return(&n_warmedup)) while
// (atomic_read_acquire(&n_warmedup)) ...`, under which only the last reader
// looks, and finds the count zero; the model waits as its comments say,
// every reader until all have checked in ("keep warming until everyone has
// checked in", "do maintain-load invocations until everyone is done"),
// since the model's threads start one after the other.
func (p *point) reader(r *kernel.Runner, i int) {
	t := r.Thread()
	p.started.Add(-1)
	for p.started.Load() != 0 {
		t.Point() // cpu_relax()
	}
	readSection(r, p.sec, p.loops) // the cache-warming invocation
	p.warmed.Add(-1)
	for p.warmed.Load() != 0 {
		readSection(r, p.sec, p.loops)
	}
	start := sched.Now() // ktime_get_mono_fast_ns()
	readSection(r, p.sec, p.loops)
	p.durations[i] = sched.Since(start)
	p.cooled.Add(-1)
	for p.cooled.Load() != 0 {
		readSection(r, p.sec, p.loops)
	}
}

// measure runs o.Runs experiments of typ with n readers on a machine of
// its own and returns each run's figure, and on a simulated machine its
// contention profile (smp.C2C), of the whole run: warm-up and cool-down
// loops too.
func measure(ctx context.Context, o *Options, env experiment.Env, typ string, n int) (runs []float64, prof *smp.Profile, err error) {
	var m *kernel.Machine
	if env.Sim != nil {
		if m, err = kernel.NewSimMachine(env.Machine, n, kernel.Sim{Seed: env.Sim.Seed, Until: env.Sim.Until}); err != nil {
			return nil, nil, err
		}
	} else {
		m = kernel.NewMachine(env.Machine, n)
	}
	defer m.Stop()
	p := &point{m: m, readers: n, loops: o.Loops, durations: make([]time.Duration, n)}
	p.started.Init("refscale.n_started")
	p.warmed.Init("refscale.n_warmedup")
	p.cooled.Init("refscale.n_cooleddown")
	err = m.Main("main_func", func() error {
		p.sec = newSection(typ, m)
		for range o.Runs {
			ns, err := p.run(ctx)
			if err != nil {
				return err
			}
			runs = append(runs, ns)
		}
		return nil
	})
	if env.Sim != nil {
		prof = smp.C2C(m.Sys)
	}
	return runs, prof, err
}

// RunModel runs every scale type at every reader count, each point on a
// machine of its own (simulated where env.Sim is set), and emits each
// point when it is done.
func RunModel(ctx context.Context, o *Options, env experiment.Env, emit func(Result)) error {
	if env.Sim != nil {
		for _, n := range o.Readers {
			if n > env.Machine.Topology.CPUs {
				return fmt.Errorf("--readers %d: the machine %s has %d CPUs", n, env.Machine.Name, env.Machine.Topology.CPUs)
			}
		}
	}
	for _, typ := range o.Types {
		for _, n := range o.Readers {
			env.Progress("refscale %s, %d readers", typ, n)
			runs, prof, err := measure(ctx, o, env, typ, n)
			if err != nil {
				return fmt.Errorf("%s %d readers: %w", typ, n, err)
			}
			r := NewResult(env.Row(VariantModel), typ, n, o.Loops, runs)
			if env.Sim != nil {
				r.Machine = env.Machine.Name
				// The primitive's lines, not the check-in counters'.
				for _, l := range prof.Lines {
					if !strings.HasPrefix(l.Name, "refscale.n_") {
						r.HotLine, r.HotLinePerAccess = l.Name, l.PerOp
						break
					}
				}
			}
			emit(r)
		}
	}
	return nil
}
