package explore

import (
	"mmlab/binfmt"
	"mmlab/cpu"
	"mmlab/kernel"
	"mmlab/mm"
	"mmlab/sched"
	"mmlab/uprobes"
)

// Scenarios are every scenario, by seed.
var Scenarios = append([]*Scenario{
	regVsFork, forkWhileBusy, perfInherit, killedUnregister, failedFork, exitDuringRegister, unoptimizeKill,
	mapsVsModify, queryVsModify,
	hitVsSync, uretprobeVsUnregister,
}, gapScenarios...)

// Lookup returns the scenario named name, nil if there is none.
func Lookup(name string) *Scenario {
	for _, sc := range Scenarios {
		if sc.Name == name {
			return sc
		}
	}
	return nil
}

// forkProps are the properties of the seed-000 scenarios with forks.
var forkProps = []Property{PropStall, PropAgree, PropInherit, PropTeardown, PropDeadlock}

// busyForkRace probes f and starts a tracer that registers and unregisters
// once, busy populating and unmapping in b's mm twice, and forker forking
// twice (its children stay).
func busyForkRace(w *World, b, forker *kernel.Task) {
	w.probe("f")
	w.task("tracer", 0, func(t *kernel.Task) { w.registerCycle(t, w.sites[0], 1) })
	w.on(b, 1, func() { busy(b, 2) })
	w.on(forker, 1, func() {
		for range 2 {
			if _, err := w.fork(forker, kernel.ForkHooks{}); err != nil {
				return
			}
		}
	})
}

var regVsFork = &Scenario{
	Name: "reg-vs-fork", Seed: "000",
	Doc: "a tracer registers and unregisters a uprobe while a thread of a busy process (mmap+populate, munmap) " +
		"forks it twice (the children stay)",
	Props: forkProps,
	build: func(w *World) {
		b := w.newProc("busy")
		forker := b.NewThread()
		forker.Comm = "forker"
		busyForkRace(w, b, forker)
	},
}

var forkWhileBusy = &Scenario{
	Name: "fork-while-busy", Seed: "000",
	Doc:   "a process that maps the file forks while another process that maps it is busy and a tracer registers",
	Props: forkProps,
	build: func(w *World) {
		p, b := w.newProc("forker"), w.newProc("busy")
		busyForkRace(w, b, p)
	},
}

var perfInherit = &Scenario{
	Name: "perf-inherit", Seed: "000",
	Doc: "a perf-style consumer whose filter wants its target tasks' mms, inherited by a forked child, " +
		"while another consumer of the uprobe is removed during the fork",
	Props: []Property{PropInherit, PropAgree, PropTeardown, PropDeadlock},
	build: func(w *World) {
		s := w.probe("f")
		p := w.newProc("parent")
		targets := []*kernel.Task{p}
		perf := consumer()
		perf.Filter = func(m *mm.MM) bool {
			for _, t := range targets {
				if t.MM == m {
					return true
				}
			}
			return false
		}
		other := consumer()
		ready := newGate()
		var up *uprobes.Uprobe
		w.task("tracer", 0, func(t *kernel.Task) {
			var err error
			if up, err = w.register(t, s, perf); err != nil {
				return
			}
			if _, err = w.register(t, s, other); err != nil {
				return
			}
			ready.open()
		})
		w.on(p, 1, func() {
			ready.wait("registered")
			_, _ = w.fork(p, kernel.ForkHooks{InitTask: func(c *kernel.Task) { targets = append(targets, c) }})
		})
		w.task("perf-close", 0, func(t *kernel.Task) {
			ready.wait("registered")
			_ = w.unregister(t, s, up, other)
		})
	},
}

var killedUnregister = &Scenario{
	Name: "killed-unregister", Seed: "000",
	Doc:   "the unregistering tracer is killed while a process that maps the file is busy",
	Props: []Property{PropKilledClean, PropAgree, PropDeadlock},
	build: func(w *World) {
		s := w.probe("f")
		w.newProc("p1")
		p2 := w.newProc("p2")
		unregistering := newGate()
		tracer := w.task("tracer", 0, func(t *kernel.Task) {
			c := consumer()
			up, err := w.register(t, s, c)
			if err != nil {
				return
			}
			unregistering.open()
			_ = w.unregister(t, s, up, c)
		})
		w.on(p2, 1, func() { busy(p2, 2) })
		w.task("killer", 1, func(*kernel.Task) {
			unregistering.wait("unregister started")
			sched.At("kill", "tracer")
			tracer.Kill()
		})
	},
}

var failedFork = &Scenario{
	Name: "failed-fork", Seed: "000",
	Doc:   "a fork fails with ENOMEM after copying one VMA while a tracer registers",
	Props: []Property{PropTeardown, PropStall, PropAgree, PropDeadlock},
	build: func(w *World) {
		w.probe("f")
		p := w.newProc("parent")
		w.task("tracer", 0, func(t *kernel.Task) { w.registerCycle(t, w.sites[0], 1) })
		w.on(p, 1, func() { _, _ = w.fork(p, kernel.ForkHooks{FailAfter: 1}) })
	},
}

var exitDuringRegister = &Scenario{
	Name: "exit-during-register", Seed: "000",
	Doc:   "a process that maps the file exits while a tracer registers and unregisters",
	Props: []Property{PropTeardown, PropAgree, PropDeadlock},
	build: func(w *World) {
		w.probe("f")
		w.newProc("p1")
		p2 := w.newProc("p2")
		w.task("tracer", 0, func(t *kernel.Task) { w.registerCycle(t, w.sites[0], 1) })
		w.on(p2, 1, func() { w.exit(p2) })
	},
}

var unoptimizeKill = &Scenario{
	Name: "unoptimize-kill", Seed: "000",
	Doc: "x86 optimized uprobes: two processes hit a uprobe on a 5-byte nop (optimized at the first hit); " +
		"one is killed at a random point of its first hit (after its handler ran), then the tracer, unregistering, is killed at a random " +
		"point of the three-write removal",
	Props: []Property{PropKilledClean, PropAgree, PropWarn, PropDeadlock},
	build: func(w *World) {
		s := w.probe("f5")
		p, q := w.newProc("p"), w.newProc("q")
		registered, ran, unregistering := newGate(), [2]gate{newGate(), newGate()}, newGate()
		hit := newGate() // p's handler ran: its first hit optimizes next
		for i, t := range []*kernel.Task{p, q} {
			w.start(t, i, func(r *kernel.Runner) {
				defer ran[i].open()
				registered.wait("registered")
				binfmt.Loop(r, 0, w.Prog.Addr("main5"), 2)
			})
		}
		tracer := w.task("tracer", 0, func(t *kernel.Task) {
			c := consumer()
			c.Handler = func(r *kernel.Runner) int {
				if r.Task == p && !hit.opened() {
					hit.open()
				}
				return 0
			}
			up, err := w.register(t, s, c)
			if err != nil {
				return
			}
			registered.open()
			ran[0].wait("hits done")
			ran[1].wait("hits done")
			unregistering.open()
			_ = w.unregister(t, s, up, c)
		})
		w.task("killer", 1, func(*kernel.Task) {
			hit.wait("p hits")
			sched.At("kill", "p")
			p.Kill()
			unregistering.wait("unregister started")
			sched.At("kill", "tracer")
			tracer.Kill()
		})
	},
}

// hitVsSync and uretprobeVsUnregister are seed 004's: the designs are the
// hit path's protection (before SRCU, after RCU Tasks Trace).
func seed004Config(d Design) uprobes.Config {
	f := uprobes.SRCU
	if d == After {
		f = uprobes.TasksTrace
	}
	return uprobes.Config{Flavor: f, Design: kernel.DesignAfter, HitPath: uprobes.HitPathToday, Optimize: uprobes.OptimizeCall}
}

// syncRace runs a probed task calling f three times while a tracer
// unregisters the consumer c and waits (sync: uprobe_unregister_sync); c's
// handlers call consumerRan, which fails PropSync once the wait returned.
func syncRace(w *World, c *uprobes.Consumer, synced *bool, sync func(t *kernel.Task), done func(stop cpu.Stop, rax uint64)) {
	s := w.probe("f")
	p := w.newProc("probed")
	registered := newGate()
	w.task("tracer", 0, func(t *kernel.Task) {
		up, err := w.register(t, s, c)
		if err != nil {
			return
		}
		registered.open()
		sched.At("tracer", "before unregister")
		if w.unregister(t, s, up, c) != nil {
			return
		}
		sync(t)
		*synced = true
	})
	w.start(p, 1, func(r *kernel.Runner) {
		registered.wait("registered")
		stop := binfmt.Loop(r, 0, w.Prog.Addr("main"), 3)
		done(stop, r.Regs.R[cpu.RAX])
	})
}

// unregisterSync is uprobe_unregister_sync() by task t.
func (w *World) unregisterSync(t *kernel.Task) { w.U.UnregisterSync(t) }

// consumerRan is the body of a seed-004 handler: a couple of preemption
// points (a handler that takes time) and the PropSync check.
func consumerRan(w *World, what string, synced *bool) {
	sched.At(what, "running")
	if *synced {
		w.fail(PropSync, "%s ran after uprobe_unregister_sync returned", what)
	}
	sched.At(what, "returning")
}

var hitVsSync = &Scenario{
	Name: "hit-vs-sync", Seed: "004",
	Doc:    "a task hits a uprobe while the tracer unregisters it and waits in uprobe_unregister_sync",
	Props:  []Property{PropSync, PropAgree, PropWarn, PropDeadlock},
	config: seed004Config,
	build: func(w *World) {
		var synced bool
		c := &uprobes.Consumer{Handler: func(*kernel.Runner) int { consumerRan(w, "handler", &synced); return 0 }}
		syncRace(w, c, &synced, w.unregisterSync, func(cpu.Stop, uint64) {})
	},
}

var uretprobeVsUnregister = &Scenario{
	Name: "uretprobe-vs-unregister", Seed: "004",
	Doc:    "a task returns through a uretprobe's trampoline while the tracer unregisters it and waits in uprobe_unregister_sync",
	Props:  []Property{PropSync, PropReturn, PropAgree, PropWarn, PropDeadlock},
	config: seed004Config,
	build: func(w *World) {
		var synced bool
		c := &uprobes.Consumer{RetHandler: func(uint64, *kernel.Runner) { consumerRan(w, "ret_handler", &synced) }}
		syncRace(w, c, &synced, w.unregisterSync, func(stop cpu.Stop, rax uint64) {
			if stop.Reason != cpu.StopHalt || rax != 3 {
				w.fail(PropReturn, "the probed task stopped with %v after %d of 3 calls", stop, rax)
			}
		})
	},
}
