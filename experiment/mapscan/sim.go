package mapscan

import (
	"context"
	"fmt"
	"time"

	"mmlab/experiment"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/procfs"
	"mmlab/sched"
)

// The simulated CPUs of run-proc-vs-map.sh's tasks (proc-vs-map.sh's
// defaults --cpumapper 0 --cpuscript 1 --cpubusytasks 2, and the
// --nbusycpus 2 that run-proc-vs-map.sh appends): the mapper on CPU 0,
// the script itself on CPU 1 (idle while the sample runs), and the
// scanners and busy-waiters where ScannerCPUs puts them.
const (
	simMapperCPU = 0
	simMinCPUs   = 2
	simBusyStep  = 10 * time.Microsecond // how often a sim busy-waiter looks at its clock (model choice)
	vmaInstrs    = 930                   // per VMA of a maps read or query
	mmapInstrs   = 26000                 // per mmap call, besides its syscall and populated page
	munmapInstrs = 13000                 // per munmap call, besides its syscall
)

// The instruction counts above are measured, not taken from seed 003: on a
// KVM guest on AMD EPYC at 2.596 GHz (Linux 6.18, this project's live
// host), a Go loop of mapper.c's calls on a 128 MiB MAP_POPULATE region
// (4,000 untimed calls, then 200,000 timed ones back to back) took 10.53 µs
// per mmap(MAP_FIXED|MAP_POPULATE) of one page and 5.30 µs per munmap, and
// a read of that process's /proc/self/maps in 4 KiB read()s took 3.36 ms
// for 9,350 lines (each the least disturbed of four runs; with mapper.c's
// 10 µs nanosleep between calls they took 16.6 and 8.85 µs, a slowdown
// after each sleep of which the simulation charges only the description's
// post-idle cost, openat(2)'s, a lower bound: machine.PostIdle). Less the
// machine's syscall (191 ns) and one populated page (299 ns), at one
// instruction per cycle (the machines' own rule, machine.Costs.Instruction)
// that is 26,000 instructions per mmap, 13,000 per munmap and 930 per maps
// line (show_map_vma, the walk's step and per-VMA lock, the chunk's copy to
// user). A model choice: a PROCMAP_QUERY costs one line's. The counts
// include the zap of the page a call unmaps, which mm charges again as the
// description's zap_page where it has one (a calibrated host; the named
// machines do not charge it): a model choice, a page's zap counted twice, a
// few percent of a call.

// instrs is n instructions on machine d.
func instrs(d machine.Description, n int) time.Duration {
	return time.Duration(float64(n) * d.Costs.Instruction.NS)
}

// walkPreemption is the maps walk's preemption on machine d: the walk
// (seq_read_iter over m_start/m_next/show_map, and do_procmap_query) has
// no cond_resched(), so under none and voluntary the reader is preempted
// only on its way back to user space (procfs.PreemptNone; the
// might_sleep() of mmap_read_lock_killable is sched.At in package
// locking, where it holds nothing); under full and lazy also inside
// (procfs.PreemptFull).
func walkPreemption(d machine.Description) (procfs.Preemption, error) {
	p, err := kernel.ParsePreempt(d.Kernel.Preempt)
	if err != nil {
		return 0, fmt.Errorf("machine %s: %w", d.Name, err)
	}
	if p == sched.PreemptFull || p == sched.PreemptLazy {
		return procfs.PreemptFull, nil
	}
	return procfs.PreemptNone, nil
}

// RunSim runs one run on a simulated machine described by d (sched's sim
// mode: virtual CPUs in virtual time, EEVDF), placed as run-proc-vs-map.sh
// places its tasks: the mapper alone on CPU 0, CPU 1 idle, and on each of
// CPUs 2 and 3 a nice-15 scanner and a normal busy-waiter (on a machine of
// 2 or 3 CPUs all four on CPU 1, as the live target places them); a text
// scanner reads each pass in a new task, the cat the live scanner runs. The
// fair class gives the scanner its nice-15 weight's share while its
// busy-waiter spins (no strict priorities). The walk is preempted as d's
// preemption model says (walkPreemption; o.Preempt is the real-time
// model's). It reads no host clock: the same d, sim and o give the same
// Stats.
//
// Charged in virtual time: each call's syscall (sched.CostSyscall) and
// its instructions (mmapInstrs, munmapInstrs) before mm takes the mmap
// lock, then what mm charges (the populated page, under the read lock as
// mm_populate takes it); a maps read()'s and a write()'s syscall, each
// VMA's instructions under the walk's lock (procfs.Options.VMACost), and
// for each cat PassCost as user time; a query's ioctl and its VMA; the
// mapper's nanosleep's syscall. A model choice: mm charges nothing for its
// VMA work, so the mapper's mmap write lock is held for no virtual time
// (the instructions are charged before it is taken), and a scanner never
// finds it held nor a VMA write-locked under it; it meets the mapper only
// queued behind it or under a VMA lock.
//
// As the real-time model, the timed test starts once each scanner has
// read the maps once (a model choice). The second busy-waiter starts a
// PassCost after the first, the time the script takes to start a process
// (a model choice; started together, two busy-waiters would stay in phase
// for ever on a machine without noise).
func RunSim(ctx context.Context, d machine.Description, sim experiment.SimRun, variant procfs.Variant, o RunSpec) (Stats, error) {
	if err := o.Check(); err != nil {
		return Stats{}, err
	}
	ncpu := min(d.Topology.CPUs, sched.MaxSimCPUs)
	if ncpu < simMinCPUs {
		return Stats{}, fmt.Errorf("mapscan: machine %s has %d CPUs: the mapper and the scanners need %d", d.Name, d.Topology.CPUs, simMinCPUs)
	}
	preempt, err := walkPreemption(d)
	if err != nil {
		return Stats{}, err
	}
	cfg, err := kernel.SimConfigOf(d, ncpu, sim.Until)
	if err != nil {
		return Stats{}, err
	}
	var ns kernel.Namespace
	m, next, err := newRegion(&ns, d, o.Seed)
	if err != nil {
		return Stats{}, err
	}
	mmapCost, munmapCost := instrs(d, mmapInstrs), instrs(d, munmapInstrs)
	sys := sched.New(sched.Config{CPUs: ncpu, Seed: sim.Seed<<20 ^ o.Seed, Sim: cfg})

	var acc Acc
	var opErr error
	done := false // the mapper has exited: its maps file is gone
	scanning := make(chan struct{})
	started := 0 // scanners that finished a first pass or ended
	scannerStarted := func() {
		if started++; started == NumScanners {
			sched.Close(scanning)
		}
	}
	sys.SpawnNamed("mapper", simMapperCPU, 0, func(th *sched.Thread) {
		defer func() { done = true }()
		t := kernel.NewTask(&ns, "mapper")
		t.Thread = th
		if o.Scanners != "none" && o.BusyDuration != 0 {
			sched.Wait(nil, "the scanners' first pass", scanning, nil)
		}
		t.TakeBlocked()
		deadline := sched.Now().Add(o.Duration)
		for sched.Now().Before(deadline) && ctx.Err() == nil {
			addr, isMmap := next()
			t0 := sched.Now()
			noise0, _ := sched.NoiseTime()
			sched.ChargeCost(sched.CostSyscall, 1)
			if isMmap {
				sched.Charge(mmapCost)
			} else {
				sched.Charge(munmapCost)
			}
			err := mapperCall(m, t, addr, isMmap)
			el := sched.Since(t0)
			if err != nil {
				opErr = err
				return
			}
			noise, _ := sched.NoiseTime()
			acc.AddBlocked(isMmap, el, t.TakeBlocked(), noise-noise0)
			sched.ChargeCost(sched.CostSyscall, 1) // nanosleep
			sched.Nanosleep(MapperSleep)
		}
	})
	passes := make([]int, NumScanners)
	scanners := make([]scanner, NumScanners)
	var scanErr [NumScanners]error
	busyCPUs := ScannerCPUs(ncpu)
	if o.Scanners != "none" {
		for i := range NumScanners {
			cpu := busyCPUs[i]
			sys.SpawnNamed(fmt.Sprintf("scanner%d", i), cpu, ScannerNice, func(th *sched.Thread) {
				defer func() {
					if passes[i] == 0 {
						scannerStarted()
					}
				}()
				s := &scanners[i]
				// open opens the maps file for a new task of thread t,
				// s's from now on.
				open := func(t *sched.Thread, comm string) (*procfs.MapsFile, error) {
					task := kernel.NewTask(&ns, comm)
					task.Thread = t
					if s.task != nil {
						s.past = append(s.past, s.task)
					}
					s.th, s.task = t, &scannerTask{Task: task}
					f, err := procfs.OpenMaps(m, procfs.Options{Variant: variant, Preempt: preempt, Waiter: s.task, Point: s.point, Thread: t, VMACost: instrs(d, vmaInstrs)})
					s.f = f
					return f, err
				}
				var pass func() error
				switch o.Scanners {
				case "text":
					// scanpid.sh: a new cat each pass, which the scheduler
					// places as a new task (place_entity() with
					// ENQUEUE_INITIAL: no lag, half a slice), while the
					// scanner waits for it; the scanner spends PassCost
					// first (its fork and the cat's exec: a model choice).
					pass = func() error {
						sched.ChargeUser(PassCost)
						exited := make(chan struct{})
						var err error
						sys.SpawnNamed(fmt.Sprintf("cat%d", i), cpu, ScannerNice, func(cat *sched.Thread) {
							defer sched.Close(exited)
							var f *procfs.MapsFile
							if f, err = open(cat, "cat"); err == nil {
								err = simScanText(f)
							}
						})
						sched.Wait(nil, "wait4 of the cat", exited, nil)
						return err
					}
				default:
					f, err := open(th, "scanner")
					if err != nil {
						scanErr[i] = err
						return
					}
					name := make([]byte, 256)
					pass = func() error { return simScanQuery(f, name) }
				}
				scanErr[i] = scanPasses(func() bool { return done }, pass, &passes[i], scannerStarted)
			})
		}
		for i := range NumScanners {
			delay := time.Duration(i) * PassCost
			sys.SpawnNamed(fmt.Sprintf("busy%d", i), busyCPUs[i], 0, func(*sched.Thread) { simBusyWait(&done, delay, o.BusyDuration) })
		}
	}
	if _, err := sys.Run(); err != nil {
		return Stats{}, fmt.Errorf("mapscan: simulated machine %s: %w", d.Name, err)
	}
	st, err := runStats(&acc, opErr, scanErr[:], passes, scanners, false)
	if err != nil {
		return Stats{}, err
	}
	return st, ctx.Err()
}

// simBusyWait is busywait.c on a simulated CPU: after delay, spin busy
// (for ever if 0) in user mode, looking at the clock every simBusyStep,
// then sleep BusySleep, and again, until the mapper has exited (done).
// Preempted meanwhile, it spins less: the period is counted on the clock.
func simBusyWait(done *bool, delay, busy time.Duration) {
	if delay > 0 {
		sched.Sleep(delay)
	}
	for !*done {
		start := sched.Now()
		for !*done && (busy == 0 || sched.Since(start) < busy) {
			step := simBusyStep
			if busy > 0 {
				step = min(step, busy-sched.Since(start))
			}
			sched.ChargeUser(step)
		}
		if busy > 0 && !*done {
			sched.Nanosleep(BusySleep)
		}
	}
}

// simScanText is scanText on a simulated machine: each read() and each
// write() of the chunk to /dev/null is a syscall.
func simScanText(f *procfs.MapsFile) error {
	f.Rewind()
	for {
		sched.ChargeCost(sched.CostSyscall, 1)
		b, err := f.Read()
		if err != nil || len(b) == 0 {
			return err
		}
		sched.ChargeCost(sched.CostSyscall, 1)
	}
}

// simScanQuery is scanQuery on a simulated machine: each query an ioctl.
func simScanQuery(f *procfs.MapsFile, name []byte) error {
	return scanQuery(f, name, func() { sched.ChargeCost(sched.CostSyscall, 1) })
}
