package kernel_test

import (
	"testing"
	"time"

	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/sched"
)

// forkTimes forks, on a simulated machine of d, a process whose one
// mapping is anonymous, private and populated with pages present pages,
// and returns the virtual time from the fork's start to the end of
// dup_mmap's copy of that mapping (ForkHooks.OnVMA: both mmap locks still
// held) and to the fork's return.
func forkTimes(t *testing.T, d machine.Description, pages int) (copied, forked time.Duration) {
	t.Helper()
	mach, task := withPages(t, d, pages)
	defer mach.Stop()
	err := mach.Main("test", func() error {
		r := mach.Start(task, 0, 0, func(r *kernel.Runner) {
			start := sched.Now()
			c, err := task.ForkWith(kernel.ForkHooks{OnVMA: func(int) { copied = sched.Since(start) }})
			forked = sched.Since(start)
			if err != nil {
				t.Error(err)
				return
			}
			c.ExitMM()
		})
		r.Wait()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return copied, forked
}

// pagesBase is where withPages maps: one PTE table's range (2 MiB
// aligned), the same page-table work for any number of pages.
const pagesBase = 0x40000000

// withPages returns a simulated machine of d with one CPU (the caller
// stops it) and a task of it whose one mapping, 512 pages of anonymous
// private memory at pagesBase, has its first pages pages present.
func withPages(t *testing.T, d machine.Description, pages int) (*kernel.Machine, *kernel.Task) {
	t.Helper()
	mach, err := kernel.NewSimMachine(d, 1, kernel.Sim{Seed: 1, Until: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	task := mach.NewTaskMM("task")
	if _, err := task.MM.Mmap(nil, pagesBase, 512*4096, mm.PROT_READ|mm.PROT_WRITE, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED, nil, 0); err != nil {
		t.Fatal(err)
	}
	if pages > 0 {
		if _, err := task.MM.Mmap(nil, pagesBase, uint64(pages)*4096, mm.PROT_READ|mm.PROT_WRITE, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED|mm.MAP_POPULATE, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	return mach, task
}

// In sim a fork of a process with P present pages takes the machine's
// fork plus P times its fork_page longer than on the same machine with
// neither charged, and the per-page part is charged inside dup_mmap, under
// the mmap locks. Not parallel: a sim run (see
// TestRunKeepsTLBWithoutFlush).
func TestForkCost(t *testing.T) {
	free := machine.MustNamed("x86-64")
	free.Costs.Fork = machine.Cost{NS: 0, Source: "test: " + machine.NotCharged}
	free.Costs.ForkPage = machine.Cost{NS: 0, Source: "test: " + machine.NotCharged}
	costed := free
	const fork, page = 40_000 * time.Nanosecond, 25 * time.Nanosecond
	costed.Costs.Fork = machine.Cost{NS: float64(fork.Nanoseconds()), Source: "test"}
	costed.Costs.ForkPage = machine.Cost{NS: float64(page.Nanoseconds()), Source: "test"}
	for _, p := range []int{0, 1, 100, 512} {
		c0, f0 := forkTimes(t, free, p)
		c1, f1 := forkTimes(t, costed, p)
		want := fork + time.Duration(p)*page
		if c1-c0 != want || f1-f0 != want {
			t.Errorf("%d pages: fork %v (to the copy's end %v), %v with no fork cost (%v): want %v more", p, f1, c1, f0, c0, want)
		}
	}
}

// munmapTime returns the virtual time the munmap of withPages's mapping
// takes, pages of it present.
func munmapTime(t *testing.T, d machine.Description, pages int) time.Duration {
	t.Helper()
	mach, task := withPages(t, d, pages)
	defer mach.Stop()
	var took time.Duration
	err := mach.Main("test", func() error {
		r := mach.Start(task, 0, 0, func(r *kernel.Runner) {
			start := sched.Now()
			if err := task.MM.Munmap(task, pagesBase, 512*4096); err != nil {
				t.Error(err)
			}
			took = sched.Since(start)
		})
		r.Wait()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return took
}

// In sim an munmap of a mapping with P present pages takes P times the
// machine's zap_page longer than on the same machine without it, and an
// unpopulated one nothing more.
func TestZapCost(t *testing.T) {
	free := machine.MustNamed("x86-64")
	free.Costs.ZapPage = machine.Cost{NS: 0, Source: "test: " + machine.NotCharged}
	costed := free
	const page = 150 * time.Nanosecond
	costed.Costs.ZapPage = machine.Cost{NS: float64(page.Nanoseconds()), Source: "test"}
	for _, p := range []int{0, 1, 100, 512} {
		t0, t1 := munmapTime(t, free, p), munmapTime(t, costed, p)
		if want := time.Duration(p) * page; t1-t0 != want {
			t.Errorf("%d pages: munmap %v, %v without zap_page: want %v more", p, t1, t0, want)
		}
	}
}
