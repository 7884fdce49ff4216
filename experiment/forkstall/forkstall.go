package forkstall

// The model runner: every task is a goroutine (no model CPU), so the figures
// are wall-clock times of the host, and the blocked times are exact
// (kernel.Task accounting). The busy process's populate holds its mmap lock
// for read for modelHold on the sched clock (populate). The tracer starts
// each attach as a populate starts. Model choice: the seed's tracer arrives
// at a random point of the busy process's cycle, and the median of 15-45
// runs evens that out; 9 runs do not, and the point would otherwise follow
// from the timing of the run before, which differs between the designs.
// Every registration after the first in the seed's 4-uprobe cases arrives
// there too. The tracer attaches through the same registration paths as BPF
// uprobe_multi (multi-1, multi-4: one register per probe, then N
// unregister_nosync and one sync) and perf (perf-4: per probe
// uprobe_register then uprobe_apply; detach apply(remove),
// unregister_nosync and sync each).
//
// So that Go's garbage collector (whose mark assists park allocating
// goroutines, the forker among them) is not what the windows measure,
// collection is off while the experiment runs (with a memory limit as the
// safety net) and a collection runs before each window (attach, detach,
// baseline), outside it. The host's own scheduling noise (other processes on
// its cores) stays in the wall-clock figures, not in the blocked times.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"mmlab/binfmt"
	"mmlab/experiment"
	"mmlab/host"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/mm/pgtable"
	"mmlab/rcu"
	"mmlab/sched"
	"mmlab/uapi"
	"mmlab/uprobes"
)

// Lock names as kernel.Task accounts them.
const (
	lockDupMmap = "dup_mmap_sem"
	lockMmap    = uapi.MmapLockName
)

// modelHold is how long one populate of the busy process holds its mmap
// lock for read.
const modelHold = 300 * time.Millisecond

// Model runs the experiment on the model: each case and mode in each design
// of env.Variants (the designs innermost), on a fresh model kernel each, in
// real time (runCase) or, where env.Sim is set, on a simulated machine
// env.Machine (runCaseSim, sim.go).
func Model(ctx context.Context, o *Options, env experiment.Env, emit func(Result)) error {
	designs, err := kernel.Designs.ParseList(env.Variants)
	if err != nil {
		return err
	}
	if env.Sim == nil && slices.ContainsFunc(o.Cases, Busy) {
		o.ModelPopulateHoldMs = ms(modelHold)
	}
	for _, c := range o.Cases {
		for _, m := range o.Modes {
			for _, d := range designs {
				cr := caseRun{Machine: env.Machine, Design: d, Case: c, Mode: m, Runs: o.Runs, Size: uint64(o.Size),
					BusyHold: modelHold, Hold: 20 * time.Millisecond, Progress: env.Progress}
				var runs []Run
				if env.Sim != nil {
					runs, err = runCaseSim(ctx, cr, kernel.Sim{Seed: env.Sim.Seed, Until: env.Sim.Until})
				} else {
					runs, err = runCase(ctx, cr)
				}
				if err != nil {
					return fmt.Errorf("%s %s %s: %w", d, c, m, err)
				}
				r := NewResult(env.Row(d.String()), c, m, uint64(o.Size), runs)
				if env.Sim != nil {
					r.Machine = env.Machine.Name
				}
				emit(r)
				f := r.ModelFigures
				env.Progress("%s %s %s: fork_max %s ms (blocked on dup_mmap_sem %s, mmap_lock %s), baseline %s ms (blocked %s, %s), attach %s ms (tracer blocked on mmap_lock %s), detach %s ms, busy hold %s ms, passes %v",
					d, c, m, experiment.Ms(r.ForkMaxMs), experiment.Ms(f.ForkSemMs), experiment.Ms(f.ForkMmapMs),
					experiment.Ms(r.BaselineMs), experiment.Ms(f.BaseSemMs), experiment.Ms(f.BaseMmapMs),
					experiment.Ms(r.AttachMs), experiment.Ms(f.AttachMmapMs), experiment.Ms(r.DetachMs), experiment.Ms(f.BusyHoldMs), f.Passes)
			}
		}
	}
	return nil
}

// caseRun is one model run of one case and mode in one design.
type caseRun struct {
	Machine    machine.Description // the machine the model kernel runs on
	Design     kernel.Design
	Case, Mode string
	Runs       int           // attach/hold/detach cycles
	Size       uint64        // bytes the busy process maps each time
	BusyHold   time.Duration // how long each populate holds the busy mmap lock
	Hold       time.Duration // how long the probes stay attached
	// Progress, if set, is told about each run as it ends.
	Progress func(format string, args ...any)
}

const (
	probeBase   = 0x100 // file offset of the first probe; probes are 1 byte apart
	probedBytes = pgtable.PageSize
)

// newText returns an inode of ns of one page of nops (the probes'
// instruction, emulated by x86 uprobes).
func newText(ns *mm.Namespace, name string) *mm.File {
	return mm.Open(mm.NewInode(ns, name, probedBytes, func(uint64) byte { return 0x90 }))
}

// populate is one cycle of the busy process's loop, mmap(size, PROT_READ,
// MAP_PRIVATE|MAP_ANONYMOUS|MAP_POPULATE) then munmap, in the locks of
// mm/util.c:vm_mmap_pgoff() and __vm_munmap(): do_mmap under the write
// lock; __mm_populate's read lock, held for hold; munmap's write lock,
// downgraded for the zap and free of the populated pages, held for
// hold*modelZapShare; then the model's munmap of the VMA, which has no pages
// to zap. Model choice: the page work is a time on the sched clock, not
// work. On the seed's 32-CPU VM the busy process has a CPU of its own, and
// its hold does not depend on who else runs; as work on this host's CPUs,
// shared with the forker and the tracer, it would run longer in the design
// whose forker is not stalled. started is called once the populate's read
// lock is held, with the time. It returns how long that lock was held.
func populate(t *kernel.Task, size uint64, hold time.Duration, started func(time.Time)) (time.Duration, error) {
	a, err := t.MM.Mmap(t, 0, size, mm.PROT_READ, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS, nil, 0)
	if err != nil {
		return 0, fmt.Errorf("busy mmap: %w", err)
	}
	t.MM.MmapReadLock(t)
	start := sched.Now()
	started(start)
	sched.Sleep(hold)
	d := sched.Since(start)
	t.MM.MmapReadUnlock()

	t.MM.MmapWriteLock(t)
	t.MM.MmapWriteDowngrade()
	sched.Sleep(time.Duration(float64(hold) * modelZapShare))
	t.MM.MmapReadUnlock()
	if err := t.MM.Munmap(t, a, size); err != nil {
		return d, fmt.Errorf("busy munmap: %w", err)
	}
	return d, nil
}

// modelZapShare is munmap's time over the populate's for a populated
// anonymous region, on this machine's kernel: 0.17-0.24 for mmap(1 GiB,
// PROT_READ|PROT_WRITE, MAP_POPULATE) then munmap (5 runs).
const modelZapShare = 0.2

// gcCycles returns the number of completed garbage collections.
func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// gcLimit is the memory limit while collection is off
// (experiment.QuietRuntime). Between the forced collections the heap grows
// with the forker's garbage, about 1.6 KiB a fork (fork then exit of a
// two-VMA mm) at some 10^5 forks a second, so it is what bounds mmlab's
// peak resident set on a fast host; a collection it starts inside a window
// is counted in the run's GCs. At 512 MiB the quick setting's model had at
// most one in a window per run on a 2-CPU host (256 MiB: up to three, and
// the after design's longest fork rose several-fold).
const gcLimit = 512 << 20

// forkRec is one timed fork of the forker.
type forkRec struct {
	start     time.Time
	dur       time.Duration
	sem, mmap time.Duration // blocked on dup_mmap_sem, on mmap locks
}

// recorder collects the forker's forks.
type recorder struct {
	mu   sync.Mutex // protects recs; a leaf
	recs []forkRec
}

func (r *recorder) add(f forkRec) {
	r.mu.Lock()
	r.recs = append(r.recs, f)
	r.mu.Unlock()
}

// reset forgets the forks recorded so far and keeps the slice's room for
// the next: a run reads only the forks that started in its own windows, and
// the forker records about 10^5 a second while collection is off.
func (r *recorder) reset() {
	r.mu.Lock()
	r.recs = r.recs[:0]
	r.mu.Unlock()
}

// window is [from, to).
type window struct{ from, to time.Time }

// longest returns, over the forks that started in any of ws, the longest
// duration, the longest blocked times, and their number.
func (r *recorder) longest(ws ...window) (dur, sem, mmap time.Duration, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.recs {
		if !slices.ContainsFunc(ws, func(w window) bool { return !f.start.Before(w.from) && f.start.Before(w.to) }) {
			continue
		}
		n++
		dur, sem, mmap = max(dur, f.dur), max(sem, f.sem), max(mmap, f.mmap)
	}
	return
}

// last returns the start of the last fork recorded.
func (r *recorder) last() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.recs) == 0 {
		return time.Time{}
	}
	return r.recs[len(r.recs)-1].start
}

// forkLoop forks p until stop, timing each fork and its blocked time, and
// lets each child exit at once.
func forkLoop(p *kernel.Task, stop *atomic.Bool, rec *recorder, errs chan<- error) {
	for !stop.Load() {
		p.TakeBlocked()
		start := time.Now()
		c, err := p.Fork()
		d := time.Since(start)
		bl := p.TakeBlocked()
		if err != nil {
			errs <- fmt.Errorf("fork: %w", err)
			return
		}
		c.ExitMM()
		if rec != nil {
			rec.add(forkRec{start: start, dur: d, sem: bl[lockDupMmap].Total, mmap: bl[lockMmap].Total})
		}
	}
}

// attach attaches the probes of mode and returns the detach. On a
// simulated machine each of the tracer's system calls is a CostSyscall:
// one bpf(BPF_LINK_CREATE) to attach and one close() of the link to
// detach (multi), one perf_event_open() and one close() per probe (perf).
func attach(u *uprobes.Uprobes, tr *kernel.Task, in *mm.Inode, mode string) (func() error, error) {
	n := Probes(mode)
	perf := mode == ModePerf4
	type probe struct {
		up *uprobes.Uprobe
		c  *uprobes.Consumer
	}
	var ps []probe
	detach := func() error {
		var errs []error
		if !perf {
			sched.ChargeCost(sched.CostSyscall, 1)
		}
		for _, p := range ps {
			if perf {
				sched.ChargeCost(sched.CostSyscall, 1)
				errs = append(errs, u.Apply(tr, p.up, p.c, false))
			}
			errs = append(errs, u.UnregisterNosync(tr, p.up, p.c))
			if perf {
				u.UnregisterSync(tr)
			}
		}
		if !perf {
			u.UnregisterSync(tr)
		}
		return errors.Join(errs...)
	}
	if !perf {
		sched.ChargeCost(sched.CostSyscall, 1)
	}
	for i := range n {
		if perf {
			sched.ChargeCost(sched.CostSyscall, 1)
		}
		c := &uprobes.Consumer{Handler: func(*kernel.Runner) int { return 0 }}
		up, err := u.Register(tr, in, probeBase+uint64(i), c)
		if err == nil {
			ps = append(ps, probe{up, c})
			if perf {
				err = u.Apply(tr, up, c, true) // perf_event_open: uprobe_perf_open
			}
		}
		if err != nil {
			return nil, errors.Join(err, detach())
		}
	}
	return detach, nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// runCase runs o.Runs cycles of one case and mode in one design on a fresh
// model kernel. Every task it starts has ended when it returns.
func runCase(ctx context.Context, o caseRun) ([]Run, error) {
	if Busy(o.Case) && (o.Size == 0 || o.BusyHold <= 0) {
		return nil, errors.New("busy case without a size and a hold")
	}
	defer experiment.QuietRuntime(gcLimit)()
	mach := kernel.NewMachineOn(o.Machine, sched.New(sched.Config{CPUs: 1, Host: host.Threads{}}))
	defer mach.Stop()
	u, err := uprobes.New(mach, uprobes.Config{Flavor: uprobes.TasksTrace, Design: o.Design, HitPath: uprobes.HitPathToday, Optimize: uprobes.OptimizeCall, GP: rcu.ThisKernel})
	if err != nil {
		return nil, err
	}
	probed := newText(&mach.NS.MM, "/usr/lib/libprobed.so")
	other := newText(&mach.NS.MM, "/usr/bin/forker")

	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	goLoop := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	started := make(chan struct{}, 1) // a populate started since the last receive
	var holds recorder                // the busy process's populates: start and length
	busyLoop := func(b *kernel.Task) {
		for !stop.Load() {
			var start time.Time
			d, err := populate(b, o.Size, o.BusyHold, func(t time.Time) {
				start = t
				select {
				case started <- struct{}{}:
				default:
				}
			})
			if err != nil {
				errs <- err
				return
			}
			holds.add(forkRec{start: start, dur: d})
		}
	}

	b, forkerText, err := execBusy(u, o.Case, probed, other, 1)
	if err != nil {
		return nil, err
	}
	switch o.Case {
	case CaseBusyMaps:
		goLoop(func() { busyLoop(b) })
		<-started
	case CaseBusyForks:
		bt := b.NewThread()
		goLoop(func() { busyLoop(b) })
		<-started
		goLoop(func() { forkLoop(bt, &stop, nil, errs) })
	}
	f, err := execForker(u, o.Case, probed, forkerText)
	if err != nil {
		return nil, err
	}
	var rec recorder
	goLoop(func() { forkLoop(f, &stop, &rec, errs) })

	tr := mach.NewTask("tracer")
	var runs []Run
	for i := range o.Runs {
		select {
		case err := <-errs:
			return nil, err
		default:
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		runtime.GC() // outside the windows
		rec.reset()  // the forks before this run's windows
		if Busy(o.Case) {
			// Arrive as a populate starts (see the top of the file).
			select {
			case <-started:
			default:
			}
			select {
			case <-started:
			case err := <-errs:
				return nil, err
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		p0 := u.Passes()
		g0 := gcCycles()
		tr.TakeBlocked()
		a0 := time.Now()
		detach, err := attach(u, tr, probed.Inode, o.Mode)
		a1 := time.Now()
		gcs := gcCycles() - g0
		tb := tr.TakeBlocked()
		if err != nil {
			return nil, fmt.Errorf("attach: %w", err)
		}
		holdErr := experiment.Sleep(ctx, o.Hold)
		runtime.GC()
		g0 = gcCycles()
		d0 := time.Now()
		detErr := detach()
		d1 := time.Now()
		gcs += gcCycles() - g0
		if holdErr != nil {
			return nil, holdErr
		}
		if detErr != nil {
			return nil, fmt.Errorf("detach: %w", detErr)
		}
		passes := u.Passes() - p0
		runtime.GC()
		b0 := time.Now()
		if err := experiment.Sleep(ctx, a1.Sub(a0)+d1.Sub(d0)); err != nil {
			return nil, err
		}
		b1 := time.Now()
		// The forks that started in the windows have ended once a later
		// one started (the forker forks one at a time).
		for !rec.last().After(b1) {
			select {
			case err := <-errs:
				return nil, err
			default:
			}
			if err := experiment.Sleep(ctx, time.Millisecond); err != nil {
				return nil, err
			}
		}
		fmax, sem, mmapB, n := rec.longest(window{a0, a1}, window{d0, d1})
		bmax, bsem, bmmap, _ := rec.longest(window{b0, b1})
		busyHold, _, _, _ := holds.longest(window{a0, b1})
		run := Run{ForkMaxMs: ms(fmax), AttachMs: ms(a1.Sub(a0)), DetachMs: ms(d1.Sub(d0)), BaselineMs: ms(bmax),
			ForkSemMs: ms(sem), ForkMmapMs: ms(mmapB), BaseSemMs: ms(bsem), BaseMmapMs: ms(bmmap),
			Forks: n, Passes: passes, GCs: gcs,
			AttachSemMs: ms(tb[lockDupMmap].Total), AttachMmapMs: ms(tb[lockMmap].Total), BusyHoldMs: ms(busyHold)}
		runs = append(runs, run)
		if o.Progress != nil {
			o.Progress("%s %s %s run %d/%d: fork_max %.2f ms (blocked: dup_mmap_sem %.2f, mmap_lock %.2f), baseline %.2f ms (blocked %.2f, %.2f), attach %.1f ms (blocked: dup_mmap_sem %.1f, mmap_lock %.1f), detach %.1f ms, passes %d, Go GCs in windows %d, busy hold %.0f ms",
				o.Design, o.Case, o.Mode, i+1, o.Runs, run.ForkMaxMs, run.ForkSemMs, run.ForkMmapMs,
				run.BaselineMs, run.BaseSemMs, run.BaseMmapMs, run.AttachMs, run.AttachSemMs, run.AttachMmapMs, run.DetachMs, passes, gcs, run.BusyHoldMs)
		}
	}
	return runs, nil
}

// execBusy starts the busy process of case c and returns it (nil in the
// idle cases) with the file the forker is to map: in busy-maps the busy
// process maps probed and the forker other; in busy-forks the busy process
// maps other, with stacks for forksThreads threads, and the forker probed.
func execBusy(u *uprobes.Uprobes, c string, probed, other *mm.File, forksThreads int) (busy *kernel.Task, forkerText *mm.File, err error) {
	switch c {
	case CaseBusyMaps:
		busy, err = binfmt.Exec(u, "busy", probed, 1)
		return busy, other, err
	case CaseBusyForks:
		busy, err = binfmt.Exec(u, "busy", other, forksThreads)
		return busy, probed, err
	}
	return nil, other, nil
}

// execForker starts the processes of case c that come after its busy
// ones: its idle processes, if any, then the forker, mapping text.
func execForker(u *uprobes.Uprobes, c string, probed, text *mm.File) (*kernel.Task, error) {
	if err := execIdle(u, probed, Idle(c)); err != nil {
		return nil, err
	}
	return binfmt.Exec(u, "forker", text, 1)
}

// execIdle starts the idle cases' n processes, each mapping the probed
// file and doing nothing.
func execIdle(u *uprobes.Uprobes, probed *mm.File, n int) error {
	for i := range n {
		if _, err := binfmt.Exec(u, fmt.Sprint("idle", i), probed, 1); err != nil {
			return err
		}
	}
	return nil
}
