package forkstall

// The runner on a simulated machine (--target sim): the same cases, modes,
// windows and figures as the real-time runner (forkstall.go), with every
// task a model thread on the machine's virtual CPUs, every time on the
// virtual clock (sched.Now) and every wait a model sleep (sched.Sleep,
// sched.Wait). Nothing here reads the host's clock.
//
// What takes virtual time is what the machine's costs charge: the busy
// process's populate is mm's own MAP_POPULATE (CostPopulatePage per page,
// under the read lock), each system call of the experiment's tasks is
// CostSyscall, a context switch and a wake-up cost what the machine says
// (sched.SimCosts), and grace periods are timed at the machine's HZ.
// Model choices:
//
//   - The busy process's threads and the forker are pinned as
//     live/forkstall pins them (BusyCPU, BusyForkCPU, ForkerCPU), each
//     with its children; the tracer is not. Each task starts on CPU 0,
//     where the tracer runs, and sleeps once on a start barrier that the
//     tracer opens when all are there; the sim's wake-up placement
//     (select_idle_sibling(), sched/sim.go selectCPU) places the tracer
//     from then on.
//   - A forked child runs, exits at once, and its parent waits for it
//     (wait4), as the seed's forker and live/forkstall's reap each child.
//     The children of one forker run on one model thread, woken
//     for each child (childRunner): sched keeps every thread a run ever
//     had, and scans them as its clock advances, so a thread per child
//     would slow the run with every fork. The thread runs on its
//     parent's CPU, as a child inherits its parent's affinity; the
//     wake-ups of the child and of its parent each cost the machine's
//     wakeup.
//   - The forker is a process of one page of text (in busy-forks the
//     probed file's), as live/forkstall's forker is (live.ForkHelperELF),
//     and that is the process whose fork calibrate's fork cost is.
//   - The busy process's forking thread (busy-forks) pauses 1 ms after
//     each fork, as live/forkstall's does.
//   - The busy process's mapping is PROT_READ, as the real-time runner's:
//     its populate maps the shared zero page (do_anonymous_page() without
//     FAULT_FLAG_WRITE), so a 4 GiB populate allocates page-table slots
//     only, no pages.
//   - The tracer arrives as a populate starts, as in the real-time runner
//     (see forkstall.go): it waits for the busy process's notice, sent
//     just before its mmap(MAP_POPULATE) call.
//
// A fork costs the description's fork and fork_page (kernel.Task.ForkWith,
// mm.MM.ForkWith), and munmap's and exit_mmap()'s zap its zap_page per
// present PTE (mm), which the named machines do not charge (no published
// figure). The kernel work the description has no cost for takes no
// virtual time: the rest of exit_mmap(), build_map_info() and the
// breakpoint writes of register_for_each_vma() (but for the page each
// write copies, which mm charges as a populated page).

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"mmlab/binfmt"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/rcu"
	"mmlab/sched"
	"mmlab/uprobes"
)

// simCPUs is the number of virtual CPUs of machine d the runner
// simulates: all of them.
func simCPUs(d machine.Description) int { return min(d.Topology.CPUs, sched.MaxSimCPUs) }

// simHZ is the tick rate of d's kernel, 250 (Kconfig's default) if not
// known, as kernel.SimConfigOf takes it.
func simHZ(d machine.Description) int {
	if d.Kernel.HZ > 0 {
		return d.Kernel.HZ
	}
	return 250
}

// Windows of a run, in the order the tracer opens them.
const (
	winAttach = iota
	winDetach
	winBaseline
	nWindows
	winNone = -1
)

// forkStat is the forks that started in one window: the longest, the
// longest blocked times and their number.
type forkStat struct {
	dur, sem, mmap time.Duration
	n              int
}

func (s *forkStat) add(dur, sem, mmap time.Duration) {
	s.dur, s.sem, s.mmap = max(s.dur, dur), max(s.sem, sem), max(s.mmap, mmap)
	s.n++
}

// simWorld is one simulated machine's run of one case, mode and design.
// Only one model thread of a sim run runs at a time, so its fields need
// no lock.
type simWorld struct {
	k    *binfmt.Kernel
	o    caseRun
	stop atomic.Bool
	err  error // the first error of a task's loop

	// The start barrier: each task counts itself in and waits on open;
	// the last one in notifies ready.
	in, want int
	ready    chan struct{}
	open     chan struct{}

	// started is notified as a populate starts; holds are the
	// populates: their start and read hold.
	started chan struct{}
	holds   []forkRec

	// The forker's forks by the window they started in (window: the
	// open one, winNone between), and the start of the last one
	// recorded.
	window int
	wins   [nWindows]forkStat
	last   time.Time

	runners []*kernel.Runner
}

// runCaseSim is runCase on a simulated machine o.Machine of all its CPUs
// (kernel.NewSimMachine), run by sim: the tracer is the machine's main
// thread (binfmt.Kernel.Main).
func runCaseSim(ctx context.Context, o caseRun, sim kernel.Sim) ([]Run, error) {
	if Busy(o.Case) && o.Size == 0 {
		return nil, errors.New("busy case without a size")
	}
	k, err := binfmt.NewSimKernel(o.Machine, simCPUs(o.Machine), sim, uprobes.Config{Flavor: uprobes.TasksTrace, Design: o.Design,
		HitPath: uprobes.HitPathToday, Optimize: uprobes.OptimizeCall, GP: rcu.Timing{HZ: simHZ(o.Machine)}})
	if err != nil {
		return nil, err
	}
	defer k.Stop()
	w := &simWorld{k: k, o: o, ready: make(chan struct{}, 1), open: make(chan struct{}), started: make(chan struct{}, 1), window: winNone}
	var runs []Run
	err = k.Main("tracer", func() error {
		var err error
		runs, err = w.run(ctx)
		return err
	})
	return runs, err
}

// start runs body as task t, pinned to cpu (modulo the machine's CPUs)
// from its next wake-up; it first waits at the start barrier.
func (w *simWorld) start(t *kernel.Task, cpu int, body func(r *kernel.Runner)) {
	w.want++
	w.runners = append(w.runners, w.k.Machine.Start(t, 0, 0, func(r *kernel.Runner) {
		r.Thread().SetAffinity(cpu % simCPUs(w.o.Machine))
		if w.in++; w.in == w.want {
			sched.Notify(w.ready)
		}
		sched.Wait(nil, "start barrier", w.open, nil)
		body(r)
	}))
}

// fail records a task's error and stops the run.
func (w *simWorld) fail(err error) {
	if w.err == nil {
		w.err = err
	}
	w.stop.Store(true)
	sched.Notify(w.started) // a tracer waiting for a populate goes on
}

// run builds the case's processes, releases them and runs o.Runs cycles
// on the calling model thread, the tracer.
func (w *simWorld) run(ctx context.Context) ([]Run, error) {
	o, u := w.o, w.k.Uprobes
	mach := w.k.Machine
	probed := newText(&mach.NS.MM, "/usr/lib/libprobed.so")
	other := newText(&mach.NS.MM, "/usr/bin/forker")
	b, forkerText, err := execBusy(u, o.Case, probed, other, 2)
	if err != nil {
		return nil, err
	}
	switch o.Case {
	case CaseBusyMaps:
		w.start(b, BusyCPU, w.busyLoop)
	case CaseBusyForks:
		bt := b.NewThread()
		w.start(b, BusyCPU, w.busyLoop)
		bc := w.newChildRunner("busy", BusyForkCPU)
		w.start(bt, BusyForkCPU, func(r *kernel.Runner) { w.forkLoop(r, bc, false) })
	}
	f, err := execForker(u, o.Case, probed, forkerText)
	if err != nil {
		return nil, err
	}
	fc := w.newChildRunner("forker", ForkerCPU)
	w.start(f, ForkerCPU, func(r *kernel.Runner) { w.forkLoop(r, fc, true) })

	tr := mach.NewTask("tracer")
	tr.Thread = sched.Current()
	tr.Thread.SetAffinity()
	sched.Wait(nil, "start barrier", w.ready, nil)
	sched.Close(w.open)
	defer func() {
		w.stop.Store(true)
		for _, r := range w.runners {
			r.Wait()
		}
	}()

	var runs []Run
	for i := range o.Runs {
		if w.err != nil {
			return nil, w.err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		w.wins = [nWindows]forkStat{}
		if Busy(o.Case) {
			sched.TryRecv(w.started)
			sched.Wait(nil, "populate start", w.started, nil)
			if w.err != nil {
				return nil, w.err
			}
		}
		p0 := u.Passes()
		tr.TakeBlocked()
		a0 := w.openWindow(winAttach)
		detach, err := attach(u, tr, probed.Inode, o.Mode)
		a1 := w.openWindow(winNone)
		tb := tr.TakeBlocked()
		if err != nil {
			return nil, fmt.Errorf("attach: %w", err)
		}
		sched.Sleep(o.Hold)
		d0 := w.openWindow(winDetach)
		err = detach()
		d1 := w.openWindow(winNone)
		if err != nil {
			return nil, fmt.Errorf("detach: %w", err)
		}
		passes := u.Passes() - p0
		w.openWindow(winBaseline)
		sched.Sleep(a1.Sub(a0) + d1.Sub(d0))
		b1 := w.openWindow(winNone)
		// The forks that started in the windows have ended once a later
		// one has (the forker forks one at a time).
		for !w.last.After(b1) && w.err == nil {
			sched.Sleep(100 * time.Microsecond)
		}
		if w.err != nil {
			return nil, w.err
		}
		var busyHold time.Duration
		for _, h := range w.holds {
			if !h.start.Before(a0) && h.start.Before(b1) {
				busyHold = max(busyHold, h.dur)
			}
		}
		fw, dw, bw := w.wins[winAttach], w.wins[winDetach], w.wins[winBaseline]
		run := Run{ForkMaxMs: ms(max(fw.dur, dw.dur)), AttachMs: ms(a1.Sub(a0)), DetachMs: ms(d1.Sub(d0)), BaselineMs: ms(bw.dur),
			ForkSemMs: ms(max(fw.sem, dw.sem)), ForkMmapMs: ms(max(fw.mmap, dw.mmap)), BaseSemMs: ms(bw.sem), BaseMmapMs: ms(bw.mmap),
			Forks: fw.n + dw.n, Passes: passes,
			AttachSemMs: ms(tb[lockDupMmap].Total), AttachMmapMs: ms(tb[lockMmap].Total), BusyHoldMs: ms(busyHold)}
		runs = append(runs, run)
		if o.Progress != nil {
			o.Progress("%s %s %s run %d/%d: fork_max %.2f ms (blocked: dup_mmap_sem %.2f, mmap_lock %.2f), baseline %.3f ms, attach %.2f ms (blocked: dup_mmap_sem %.2f, mmap_lock %.2f), detach %.2f ms, passes %d, forks %d, busy hold %.1f ms (virtual)",
				o.Design, o.Case, o.Mode, i+1, o.Runs, run.ForkMaxMs, run.ForkSemMs, run.ForkMmapMs,
				run.BaselineMs, run.AttachMs, run.AttachSemMs, run.AttachMmapMs, run.DetachMs, passes, run.Forks, run.BusyHoldMs)
		}
	}
	return runs, nil
}

// openWindow makes win the window that forks starting from now count in
// and returns the time.
func (w *simWorld) openWindow(win int) time.Time {
	w.window = win
	return sched.Now()
}

// busyLoop is the busy process: populates until the run stops.
func (w *simWorld) busyLoop(r *kernel.Runner) {
	for !w.stop.Load() {
		start, d, err := populateSim(r.Task, w.o.Size, func() { sched.Notify(w.started) })
		if err != nil {
			w.fail(err)
			return
		}
		w.holds = append(w.holds, forkRec{start: start, dur: d})
	}
}

// populateSim is one cycle of the busy process's loop on a simulated
// machine: the system calls mmap(size, PROT_READ, MAP_PRIVATE|
// MAP_ANONYMOUS|MAP_POPULATE) and munmap, each mm's own work
// (mm.MM.Mmap's do_mmap and __mm_populate, Munmap) and a CostSyscall.
// started is called as the mmap starts. It returns the mmap's start and
// its populate's read hold: the call's length less its time blocked on
// the mmap lock.
func populateSim(t *kernel.Task, size uint64, started func()) (time.Time, time.Duration, error) {
	sched.ChargeCost(sched.CostSyscall, 1)
	t.TakeBlocked()
	start := sched.Now()
	started()
	a, err := t.MM.Mmap(t, 0, size, mm.PROT_READ, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_POPULATE, nil, 0)
	d := sched.Since(start) - t.TakeBlocked()[lockMmap].Total
	if err != nil {
		return start, d, fmt.Errorf("busy mmap: %w", err)
	}
	sched.ReturnToUser()
	sched.ChargeCost(sched.CostSyscall, 1)
	if err := t.MM.Munmap(t, a, size); err != nil {
		return start, d, fmt.Errorf("busy munmap: %w", err)
	}
	sched.ReturnToUser()
	return start, d, nil
}

// forkLoop forks until the run stops, each fork a CostSyscall and the
// kernel's fork (kernel.Task.Fork); the child runs on cr, exits, and is
// waited for. With record, each fork is timed into the window it started
// in; without, the loop pauses 1 ms after each fork.
func (w *simWorld) forkLoop(r *kernel.Runner, cr *childRunner, record bool) {
	p := r.Task
	defer cr.close()
	for !w.stop.Load() {
		p.TakeBlocked()
		win := w.window
		start := sched.Now()
		sched.ChargeCost(sched.CostSyscall, 1)
		c, err := p.Fork()
		sched.ReturnToUser()
		d := sched.Since(start)
		bl := p.TakeBlocked()
		if err != nil {
			w.fail(fmt.Errorf("fork: %w", err))
			return
		}
		if record {
			if win != winNone {
				w.wins[win].add(d, bl[lockDupMmap].Total, bl[lockMmap].Total)
			}
			w.last = start
		}
		cr.run(c)
		if !record {
			sched.Sleep(time.Millisecond)
		}
	}
}

// childRunner is the model thread a forker's children run on, one at a
// time: each exits at once (exit_group: a CostSyscall and exit_mm).
type childRunner struct {
	child  *kernel.Task
	go_    chan struct{} // a child to run, or the end (child nil)
	exited chan struct{} // the child has exited
}

// newChildRunner starts the children's thread of the forker named comm,
// pinned to its CPU, cpu.
func (w *simWorld) newChildRunner(comm string, cpu int) *childRunner {
	cr := &childRunner{go_: make(chan struct{}, 1), exited: make(chan struct{}, 1)}
	w.runners = append(w.runners, w.k.Machine.Start(w.k.Machine.NewTask(comm+" children"), 0, 0, func(r *kernel.Runner) {
		r.Thread().SetAffinity(cpu % simCPUs(w.o.Machine))
		for {
			sched.Wait(nil, "fork", cr.go_, nil)
			if cr.child == nil {
				return
			}
			sched.ChargeCost(sched.CostSyscall, 1)
			cr.child.ExitMM()
			cr.child = nil
			sched.Notify(cr.exited)
		}
	}))
	return cr
}

// run runs child c and waits for it to exit (wait4: a CostSyscall).
func (cr *childRunner) run(c *kernel.Task) {
	cr.child = c
	sched.Notify(cr.go_)
	sched.ChargeCost(sched.CostSyscall, 1)
	sched.Wait(nil, "wait4", cr.exited, nil)
}

// close ends the children's thread.
func (cr *childRunner) close() {
	cr.child = nil
	sched.Notify(cr.go_)
}
