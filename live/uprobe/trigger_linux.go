package uprobe

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"mmlab/host"
)

// batch is how many calls a producer makes between two looks at its stop
// flag; one batch takes 0.5 µs to 5 ms. Every producer makes at least one.
const batch = 4096

// producerCount is one producer's call count, alone on its cache lines.
type producerCount struct {
	_ [64]byte
	n atomic.Uint64
	_ [64]byte
}

// Trigger runs the trigger benchmark: cfg.CPUs pinned OS threads call the
// case's target in a tight loop while the probe, if any, counts hits with
// BPF, as the kernel's `bench -a trig-<case>` does. The probe is attached
// before the producers start and detached after they stop, so every call is
// a hit; Trigger fails if the counts differ.
func Trigger(ctx context.Context, cfg TriggerConfig) (TriggerResult, error) {
	var res TriggerResult
	if cfg.CPUs < 1 {
		return res, fmt.Errorf("trigger: %d cpus", cfg.CPUs)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	nsamples := max(1, int(cfg.Duration/cfg.Interval))
	cpus, err := host.CPUs()
	if err != nil {
		return res, err
	}
	tg, err := LookupTarget(cfg.Target)
	if err != nil {
		return res, err
	}

	var probes *Probes
	if cfg.Probed {
		probes, err = Attach(ctx, Spec{Path: tg.Path, Offsets: []uint64{tg.Offset}, Mode: cfg.Mode, Ret: cfg.Ret})
		if err != nil {
			return res, err
		}
		defer probes.Close()
	}

	// One P for each producer and one for this sampler, so that sampling
	// never waits for a producer to be preempted. The old count comes back
	// once every producer has exited.
	procs := runtime.GOMAXPROCS(0)
	if procs < cfg.CPUs+1 {
		runtime.GOMAXPROCS(cfg.CPUs + 1)
	}

	counts := make([]producerCount, cfg.CPUs)
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, cfg.CPUs)
	for i := range cfg.CPUs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The thread stays locked: it exits with the goroutine and
			// takes its CPU affinity with it.
			runtime.LockOSThread()
			if err := host.Pin(cpus[i%len(cpus)]); err != nil {
				errs <- withErrno(fmt.Sprintf("pin producer %d", i), err)
				return
			}
			for {
				callLoop(tg.PC, batch)
				counts[i].n.Add(batch)
				if stop.Load() {
					return
				}
			}
		}()
	}
	calls := func() uint64 {
		var n uint64
		for i := range counts {
			n += counts[i].n.Load()
		}
		return n
	}
	count := calls
	if cfg.Probed {
		count = func() uint64 {
			h, err := probes.Hits()
			if err != nil {
				// The map is ours and open: this does not fail.
				panic(err)
			}
			return h
		}
	}

	err = func() error {
		wait := func(d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case err := <-errs:
				return err
			case <-t.C:
				return nil
			}
		}
		if err := wait(cfg.Warmup); err != nil {
			return err
		}
		prev, t0 := count(), time.Now()
		next := t0
		for range nsamples {
			next = next.Add(cfg.Interval)
			if err := wait(time.Until(next)); err != nil {
				return err
			}
			n, t := count(), time.Now()
			res.Samples = append(res.Samples, float64(n-prev)/t.Sub(t0).Seconds())
			prev, t0 = n, t
		}
		return nil
	}()
	// A producer stops at the end of its batch, which takes long when
	// many share few CPUs, and the runtime cannot preempt it inside the
	// assembly loop. So GOMAXPROCS (which stops the world) is put back only
	// once all have exited, and an interrupted run does not wait for them:
	// they exit on their own, and the probes are detached on return.
	stop.Store(true)
	stopped := make(chan struct{})
	go func() {
		wg.Wait()
		if procs < cfg.CPUs+1 {
			runtime.GOMAXPROCS(procs)
		}
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		return res, ctx.Err()
	}
	if err != nil {
		return res, err
	}
	res.Calls = calls()
	if cfg.Probed {
		res.Hits = count()
		if res.Hits != res.Calls {
			return res, fmt.Errorf("trigger %s: BPF counted %d hits for %d calls", cfg.Target, res.Hits, res.Calls)
		}
	}
	return res, nil
}
