package mapscan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"time"

	"mmlab/errno"
	"mmlab/experiment"
	"mmlab/host"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/procfs"
	"mmlab/sched"
	"mmlab/uapi"
)

// Model runs the benchmark on the model, once per variant of env: o.Runs
// runs of each case with that maps walk, in real time (RunModel) or, where
// env.Sim is set, each run on a simulated machine of its own (RunSim),
// whose results name the machine.
func Model(ctx context.Context, o *Options, env experiment.Env, emit func(Result)) error {
	for _, name := range env.Variants {
		v, err := procfs.Variants.Parse(name)
		if err != nil {
			return err
		}
		one := func(ctx context.Context, r RunSpec) (Stats, error) { return RunModel(ctx, env.Machine, v, r) }
		out := emit
		if env.Sim != nil {
			one = func(ctx context.Context, r RunSpec) (Stats, error) { return RunSim(ctx, env.Machine, *env.Sim, v, r) }
			out = func(r Result) {
				r.Machine = env.Machine.Name
				emit(r)
			}
		}
		if err := RunCases(ctx, o, env.Row(name), one, out); err != nil {
			return err
		}
	}
	return nil
}

// regionBase is where the model maps the region.
const regionBase = 0x7f0000000000

// RunModel runs one model run on the machine d with the maps walk variant, placed as
// run-proc-vs-map.sh places its tasks (proc-vs-map.sh --nbusycpus 2
// --nbusytasks 1): the mapper alone on model CPU 0, and on each of model
// CPUs 1 and 2 one nice-15 scanner with one normal-priority busy-waiter.
// The scanners' kernel code is preempted as o.Preempt says. A model choice
// the kernel does not make: the model CPUs have no time slices, so a nice-15
// scanner runs only while its busy-waiter sleeps (where CFS would also give
// it its small weight's share).
//
// The run keeps Go's runtime out of the timings as forkstall does: no
// garbage collection (below a memory limit), and more Ps than model
// threads, so that a woken model thread waits for its host CPU only, never
// for a P held by a thread of another model CPU. Its OS threads take host
// priorities in the model's order (sched.Config.HostPriority: the mapper
// and the busy-waiters SCHED_FIFO, the scanners nice 15): where the two
// scanner CPUs share a host CPU, a busy-waiter whose host sleep ends would
// otherwise wait behind the other CPU's running scanner thread for the rest
// of its host slice or to the next host tick, and its busy time, during
// which its scanner cannot run, would grow by as much.
func RunModel(ctx context.Context, d machine.Description, variant procfs.Variant, o RunSpec) (Stats, error) {
	if err := o.Check(); err != nil {
		return Stats{}, err
	}
	var ns kernel.Namespace // the run's tasks and its address space
	m, next, err := newRegion(&ns, d, o.Seed)
	if err != nil {
		return Stats{}, err
	}
	op := func(w *kernel.Task) (bool, error) {
		addr, isMmap := next()
		return isMmap, mapperCall(m, w, addr, isMmap)
	}

	defer experiment.QuietRuntime(gcLimit)()
	sys := sched.New(sched.Config{CPUs: 1 + NumScanners, Host: host.Threads{}, Hosts: hostPlacement(1+NumScanners, runtime.NumCPU()), HostPriority: true})
	var acc Acc
	var opErr error
	mapperDone := make(chan struct{})
	scanning := make(chan struct{}, NumScanners) // a scanner finished its first pass, or ended
	// The mapper: CPU 0, normal priority.
	sys.Spawn(0, 0, func(th *sched.Thread) {
		defer close(mapperDone)
		t := kernel.NewTask(&ns, "mapper")
		t.Thread = th
		hw, _ := host.OpenRunDelay() // nil where the kernel gives none
		defer hw.Close()
		if o.Scanners != "none" && o.BusyDuration != 0 {
			// A model choice: the timed test starts once each scanner has
			// read the maps once (mapper.c starts when the script has
			// launched them), so that every run times calls against
			// scanners that scan. Busy-waiters that never sleep starve
			// the scanners: then it starts at once.
			t.Block(func() {
				for range NumScanners {
					select {
					case <-scanning:
					case <-ctx.Done():
						return
					}
				}
			})
		}
		deadline := time.Now().Add(o.Duration)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			t.TakeBlocked()
			w0, _ := hw.Read()
			t0 := time.Now()
			isMmap, err := op(t)
			d := time.Since(t0)
			if err != nil {
				opErr = err
				return
			}
			if w1, ok := hw.Read(); ok {
				// The mapper has its model CPU to itself: time its OS
				// thread waited for a host CPU is the host's, not the
				// model's.
				acc.hostWaitMax = max(acc.hostWaitMax, w1-w0)
				d -= min(w1-w0, d)
			}
			acc.AddBlocked(isMmap, d, t.TakeBlocked(), 0)
			t.Block(func() { host.Nanosleep(MapperSleep) })
		}
	})
	passes := make([]int, NumScanners)
	scanners := make([]scanner, NumScanners)
	var scanErr [NumScanners]error
	if o.Scanners != "none" {
		for i := range NumScanners {
			cpu := 1 + i
			sys.Spawn(cpu, ScannerNice, func(th *sched.Thread) {
				defer func() {
					if passes[i] == 0 {
						scanning <- struct{}{}
					}
				}()
				t := kernel.NewTask(&ns, "scanner")
				t.Thread = th
				s := &scanners[i]
				hw, _ := host.OpenRunDelay()
				defer hw.Close()
				s.th, s.task = th, &scannerTask{Task: t, hw: hw}
				f, err := procfs.OpenMaps(m, procfs.Options{Variant: variant, Preempt: o.Preempt, Waiter: s.task, Point: s.point, Thread: th})
				if err != nil {
					scanErr[i] = err
					return
				}
				s.f = f
				name := make([]byte, 256)
				null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
				if err != nil {
					scanErr[i] = err
					return
				}
				defer null.Close()
				pass := func() error { return scanQuery(f, name, nil) }
				if o.Scanners == "text" {
					pass = func() error {
						spend(th, PassCost)
						return scanText(f, null)
					}
				}
				scanErr[i] = scanPasses(th.Stopping, pass, &passes[i], func() { scanning <- struct{}{} })
			})
		}
		// As proc-vs-map.sh: the busy-waiters start after the scanners.
		start := time.Now()
		for i := range NumScanners {
			offset := time.Duration(i) * (o.BusyDuration + BusySleep) / NumScanners
			sys.Spawn(1+i, 0, func(th *sched.Thread) { busyWait(&ns, th, start.Add(offset), o.BusyDuration) })
		}
	}
	<-mapperDone
	sys.Stop()
	st, err := runStats(&acc, opErr, scanErr[:], passes, scanners, true)
	if err != nil {
		return Stats{}, err
	}
	st.NoHostPriority = !sys.HostPriority()
	return st, ctx.Err()
}

// scanPasses is a scanner's loop on either runner: pass until stop says
// so or pass fails, each pass counted in *n, and first called after the
// first one.
func scanPasses(stop func() bool, pass func() error, n *int, first func()) error {
	for !stop() {
		if err := pass(); err != nil {
			return err
		}
		*n++
		if *n == 1 {
			first()
		}
	}
	return nil
}

// runStats ends a run of either runner: the mapper's or a scanner's error,
// else the mapper's figures with the scanners' passes, preemptions and
// lock waits, and with hostWait their waits for a host CPU (a simulated
// machine has no host).
func runStats(acc *Acc, opErr error, scanErr []error, passes []int, scanners []scanner, hostWait bool) (Stats, error) {
	if opErr != nil {
		return Stats{}, fmt.Errorf("mapscan: mapper: %w", opErr)
	}
	for _, err := range scanErr {
		if err != nil {
			return Stats{}, fmt.Errorf("mapscan: scanner: %w", err)
		}
	}
	st := acc.Stats()
	for i, p := range passes {
		st.ScanPasses += p
		st.Preempted = scanners[i].held.merge(st.Preempted)
		for _, t := range append(scanners[i].past, scanners[i].task) {
			if t == nil {
				continue
			}
			for lock, b := range t.TakeBlocked() {
				st.ScannersSlept = Held{lock: {Count: int(b.Count), MaxUS: us(b.Max)}}.merge(st.ScannersSlept)
			}
			st.ScannersRunWait = t.runWait.merge(st.ScannersRunWait)
			if hostWait {
				st.ScannersHostWait = t.hostWait.merge(st.ScannersHostWait)
			}
		}
	}
	return st, nil
}

// newRegion returns the mapper's address space in ns on machine d, its
// region mapped and populated and fragmented by WarmupOps untimed calls,
// and the mapper's choice of its next call (mapper.c): a random page of
// the region, to re-map with probability 1/2 (mmap true), else to unmap.
// The pages are drawn from seed.
func newRegion(ns *kernel.Namespace, d machine.Description, seed uint64) (*mm.MM, func() (addr uint64, mmap bool), error) {
	m := mm.New(&ns.MM, d.Features)
	// mapper.c: the whole region MAP_POPULATE.
	if _, err := m.Mmap(nil, regionBase, RegionSize, mm.PROT_READ|mm.PROT_WRITE, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED|mm.MAP_POPULATE, nil, 0); err != nil {
		return nil, nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x6d61707363616e))
	next := func() (uint64, bool) {
		addr := uint64(regionBase + rng.IntN(regionPages)*PageSize)
		return addr, rng.IntN(2) == 0
	}
	for range WarmupOps {
		if err := call(m, nil, next); err != nil {
			return nil, nil, err
		}
	}
	return m, next, nil
}

// call makes the mapper's call at the page next picks, for w.
func call(m *mm.MM, w *kernel.Task, next func() (uint64, bool)) error {
	addr, isMmap := next()
	return mapperCall(m, w, addr, isMmap)
}

// mapperCall re-maps the page at addr (MAP_FIXED|MAP_POPULATE) if isMmap,
// else unmaps it, for w.
func mapperCall(m *mm.MM, w *kernel.Task, addr uint64, isMmap bool) error {
	if isMmap {
		_, err := m.Mmap(w, addr, PageSize, mm.PROT_READ|mm.PROT_WRITE, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED|mm.MAP_POPULATE, nil, 0)
		return err
	}
	return m.Munmap(w, addr, PageSize)
}

// busyWait is busywait.c on a model thread: keep the CPU for busy, sleep
// BusySleep, repeat (keep it for ever if busy is 0), in periods counted
// from start. It keeps its model CPU without spinning its host CPU: while
// current it sleeps (host.Nanosleep) to the end of its busy time, as a thread
// that stalls its CPU (it runs no model code, so nothing waits for it).
//
// Model choices the kernel does not make, because two scanner CPUs may
// share one host CPU (hostPlacement): the busy-waiters do not spin the host
// CPU, and their periods start a fraction of a period apart (RunModel), so
// that the scanners, which run only while their busy-waiters sleep, seldom
// run at the same time and the host does not preempt one for the other
// while it holds a lock. busywait.c restarts its period when its sleep
// ends, so two of them drift in and out of phase. A busy time ends when
// the busy-waiter's OS thread runs again, at once when the threads have
// host priorities (RunModel), else up to a host time slice late on a host
// CPU shared with the other scanner's thread.
func busyWait(ns *kernel.Namespace, th *sched.Thread, start time.Time, busy time.Duration) {
	t := kernel.NewTask(ns, "busy")
	t.Thread = th
	period := busy + BusySleep
	for !th.Stopping() {
		if busy == 0 {
			host.Nanosleep(BusySleep) // keep the CPU; see Stopping again
			continue
		}
		phase := time.Since(start) % period
		if phase < 0 {
			phase += period // before start: the periods run back from it
		}
		if phase < busy {
			host.Nanosleep(busy - phase)
		} else {
			t.Block(func() { host.Nanosleep(period - phase) })
		}
	}
}

// spend keeps th's model CPU for d of its time as user-space work that
// holds no lock (a text scanner's cat process, PassCost), with a
// preemption point every spendStep, so that a better thread waking on the
// CPU takes it within one. Like busyWait it sleeps on the host while it
// holds its model CPU, so it takes no host CPU from another model CPU's
// threads.
func spend(th *sched.Thread, d time.Duration) {
	for d > 0 && !th.Stopping() {
		t0 := time.Now()
		host.Nanosleep(min(d, spendStep))
		d -= time.Since(t0)
		th.Point()
	}
}

// spendStep is spend's distance between preemption points.
const spendStep = 50 * time.Microsecond

// hostPlacement returns the host CPU (sched.Config.Hosts) of each of ncpu
// model CPUs on a host with nhost CPUs: the mapper's CPU 0 on a host CPU of
// its own if there are two or more, the scanner CPUs spread over the rest.
func hostPlacement(ncpu, nhost int) []int {
	hosts := make([]int, ncpu)
	for i := 1; i < ncpu && nhost > 1; i++ {
		hosts[i] = 1 + (i-1)%(nhost-1)
	}
	return hosts
}

// gcLimit is the memory limit while collection is off: a bound on the
// heap, which in the quick setting stays under 40 MiB.
const gcLimit = 512 << 20

// Held is a scanner's wait accounting: how often it was preempted inside
// the walk, by the lock it held meanwhile (procfs.MapsFile.Holding), and
// for how long at most it was off its CPU then.
type Held map[string]HeldStat

// HeldStat counts the preemptions of scanners holding one lock.
type HeldStat struct {
	Count int     `json:"count"`
	MaxUS float64 `json:"max_us"` // the longest time off the CPU
}

// scannerTask is a scanner's task as the locks see it, with its lock
// sleeps timed on the model's clock (sched.Now) in two parts: until its wake-up, and from the wake-up until
// it has its CPU again (a reader is granted the lock before it is woken,
// and holds it that time too), and of that the time its OS thread waited
// for a host CPU.
type scannerTask struct {
	*kernel.Task
	hw          *host.RunDelay // the scanner thread's, or nil
	runWaitMax  time.Duration  // the longest wait for the CPU after a wake-up since the last RecordBlocked
	hostWaitMax time.Duration  // the longest part of one waiting for a host CPU
	runWait     Held           // by lock: those waits (Stats.ScannersRunWait)
	hostWait    Held           // by lock: their parts waiting for a host CPU
}

// Block is kernel.Task.Block, timing the wait for the CPU after the wake-up.
func (st *scannerTask) Block(wait func()) {
	var woken time.Time
	var w0 time.Duration
	st.Task.Block(func() {
		wait()
		woken = sched.Now()
		w0, _ = st.hw.Read()
	})
	st.runWaitMax = max(st.runWaitMax, sched.Since(woken))
	if w1, ok := st.hw.Read(); ok {
		st.hostWaitMax = max(st.hostWaitMax, w1-w0)
	}
}

// RecordBlocked is kernel.Task.RecordBlocked, also accounting the sleeps'
// waits for the CPU to lock.
func (st *scannerTask) RecordBlocked(lock string, d time.Duration) {
	st.Task.RecordBlocked(lock, d)
	if st.runWait == nil {
		st.runWait, st.hostWait = Held{}, Held{}
	}
	for _, h := range []struct {
		held Held
		d    time.Duration
	}{{st.runWait, st.runWaitMax}, {st.hostWait, st.hostWaitMax}} {
		hs := h.held[lock]
		hs.Count++
		hs.MaxUS = max(hs.MaxUS, us(h.d))
		h.held[lock] = hs
	}
	st.runWaitMax, st.hostWaitMax = 0, 0
}

// scanner is one scanner thread's preemption point and wait accounting.
type scanner struct {
	th   *sched.Thread
	task *scannerTask
	past []*scannerTask // the tasks it ran as before task (a simulated text scanner's cats)
	f    *procfs.MapsFile
	held Held
}

// point is the scanner's preemption point (procfs Options.Point): th.Point,
// accounting a switch-out while the walk holds a lock to that lock
// (f.Holding).
func (s *scanner) point() {
	lock := s.f.Holding()
	_, n0 := s.th.Switches()
	t0 := sched.Now()
	s.th.Point()
	if _, n := s.th.Switches(); n == n0 || lock == "" {
		return
	}
	if s.held == nil {
		s.held = Held{}
	}
	hs := s.held[lock]
	hs.Count++
	hs.MaxUS = max(hs.MaxUS, us(sched.Since(t0)))
	s.held[lock] = hs
}

// merge adds h to into (which may be nil) and returns it.
func (h Held) merge(into Held) Held {
	for lock, hs := range h {
		if into == nil {
			into = Held{}
		}
		cur := into[lock]
		cur.Count += hs.Count
		cur.MaxUS = max(cur.MaxUS, hs.MaxUS)
		into[lock] = cur
	}
	return into
}

// AddBlocked is Add for a model call, with the time it blocked per lock
// (kernel.Task.TakeBlocked) and, in sim, the time it lost to its CPU's
// interruptions: the slowest call's are kept.
func (a *Acc) AddBlocked(mmap bool, d time.Duration, blocked map[string]kernel.BlockStat, noise time.Duration) {
	var wait time.Duration
	for _, b := range blocked {
		wait += b.Total
	}
	if d > max(a.mmapMax, a.munmapMax) {
		a.slowest, a.slowestNoise = map[string]float64{}, noise
		for lock, b := range blocked {
			a.slowest[lock] = us(b.Total)
		}
	}
	a.Add(mmap, d, wait)
}

// scanText reads the whole maps text, one 4 KiB chunk per read, and
// writes each chunk to out, as scanpid.sh's cat /proc/PID/maps >/dev/null
// does: with out /dev/null, a real write(2), the trip through user space
// between two reads during which the scanner holds no lock.
func scanText(f *procfs.MapsFile, out io.Writer) error {
	f.Rewind()
	for {
		b, err := f.Read()
		if err != nil || len(b) == 0 {
			return err
		}
		if _, err := out.Write(b); err != nil {
			return err
		}
	}
}

// scanQuery walks every VMA with PROCMAP_QUERY (COVERING_OR_NEXT_VMA from 0,
// then from the end of each VMA found), asking for names; each, if set, is
// called before each query.
func scanQuery(f *procfs.MapsFile, name []byte, each func()) error {
	addr := uint64(0)
	for {
		if each != nil {
			each()
		}
		q := uapi.ProcmapQuery{Size: uapi.SizeofProcmapQuery, QueryAddr: addr,
			QueryFlags: uapi.PROCMAP_QUERY_COVERING_OR_NEXT_VMA, VMANameSize: uint32(len(name)), VMANameAddr: 1}
		err := f.Query(&q, name, nil)
		if err != nil {
			if isENOENT(err) {
				return nil
			}
			return err
		}
		addr = q.VMAEnd
	}
}

func isENOENT(err error) bool { return errors.Is(err, errno.ENOENT) }
