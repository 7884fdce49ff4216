package schedwait

import (
	"context"
	"fmt"
	"time"

	"mmlab/experiment"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/sched"
	"mmlab/sched/fair"
)

// RunSim is the model runner: the workload in sched's sim mode on env.Machine
// (SimConfigOf), one result. It reads no host clock; the same machine and
// seed give the same result.
func RunSim(ctx context.Context, o *Options, env experiment.Env, emit func(Result)) error {
	cfg, ncpu, err := SimConfigOf(env.Machine, o.Duration.D())
	if err != nil {
		return err
	}
	ws, err := SimWaits(cfg, ncpu, o.Seed)
	if err != nil {
		return err
	}
	r := Summarize(experiment.Row{Target: experiment.Model, Variant: VariantSim}, ws)
	r.Sim = &Sim{Machine: env.Machine.Name, Release: env.Machine.Kernel.Release, HZ: cfg.HZ, Preempt: cfg.Preempt.String(), CPUs: ncpu,
		BaseSliceUS: float64(fair.BaseSlice(cfg.NormalizedSlice, ncpu)) / 1e3}
	emit(r)
	return ctx.Err()
}

// SimConfigOf is the sim configuration of machine d for a run of length
// until, and the simulated CPU count: d's CPUs (1 if unknown; the count
// sets the base slice, as update_sysctl() scales it by the online CPUs),
// both tasks on CPU 0 and the others idle. HZ is d's (250, Kconfig's
// default, if unknown); the preemption model d's (none if unknown); the
// base slice that of d's release (NormalizedSlice); the fair class's
// features v6.19's, the only set sched/fair has.
func SimConfigOf(d machine.Description, until time.Duration) (*sched.SimConfig, int, error) {
	p, err := kernel.ParsePreempt(d.Kernel.Preempt)
	if err != nil {
		return nil, 0, fmt.Errorf("machine %s: %w", d.Name, err)
	}
	hz := d.Kernel.HZ
	if hz <= 0 {
		hz = 250
	}
	ncpu := min(max(d.Kernel.CPUs, 1), sched.MaxSimCPUs)
	return &sched.SimConfig{Until: until, HZ: hz, Preempt: p, NormalizedSlice: kernel.NormalizedSlice(d.Kernel.Release)}, ncpu, nil
}

// SimWaits runs the workload on CPU 0 of a sim System of ncpu CPUs under
// cfg and returns the nice-15 task's wake-ups. Both tasks' sleeps end on
// time (sched.Sleep, not sched.Nanosleep): the live helper sets its
// threads' timer slack to 1 ns (pairMain, host.SetTimerSlack). The wait is
// from the timer's expiry, where the sim enqueues the sleeper, to the
// task's running: sim mode charges no wake-up or context-switch cost here,
// so a wake-up that preempts or finds the CPU idle waits 0.
func SimWaits(cfg *sched.SimConfig, ncpu int, seed uint64) ([]Wake, error) {
	sys := sched.New(sched.Config{CPUs: ncpu, Seed: seed, Sim: cfg})
	hogAsleep := false
	sys.SpawnNamed("hog", 0, HogNice, func(*sched.Thread) {
		for {
			sched.ChargeUser(HogSpin)
			hogAsleep = true
			sched.Sleep(HogSleep)
			hogAsleep = false
		}
	})
	next := Sleeps(seed)
	var ws []Wake
	sys.SpawnNamed("nice15", 0, Nice15, func(*sched.Thread) {
		for {
			sched.ChargeUser(Nice15Run)
			s := next()
			due := sched.Now().Add(s)
			sched.Sleep(s)
			// The hog's flag as of now: set while it sleeps, cleared when
			// it next runs (so a hog woken but not yet run counts asleep).
			w := Wake{Wait: sched.Since(due)}
			w.AtOnce = w.Wait == 0
			w.Preempt = w.AtOnce && !hogAsleep
			switch {
			case w.AtOnce:
			case hogAsleep:
				w.After = AfterSleep
			default:
				w.After = AfterPreempt
			}
			ws = append(ws, w)
		}
	})
	if _, err := sys.Run(); err != nil {
		return nil, fmt.Errorf("schedwait: sim run: %w", err)
	}
	return ws, nil
}
