package forkstall

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"mmlab/experiment"
	"mmlab/kernel"
	"mmlab/machine"
)

// simMachine is seed 000's machine, which the sim tests run on.
var simMachine = machine.MustNamed("epyc-vm-32")

type simKey struct {
	design kernel.Design
	cs     string
}

// simRuns are the runs of simRun so far, which the tests share.
var simRuns sync.Map // simKey → Run

// simRun returns one cycle of case c and mode multi-1 in design d on
// simMachine with seed 1, the busy process populating simSize bytes.
func simRun(t *testing.T, d kernel.Design, c string) Run {
	t.Helper()
	if r, ok := simRuns.Load(simKey{d, c}); ok {
		return r.(Run)
	}
	runs, err := runCaseSim(context.Background(), caseRun{Machine: simMachine, Design: d, Case: c, Mode: ModeMulti1, Runs: 1,
		Size: simSize, Hold: time.Millisecond}, kernel.Sim{Seed: 1, Until: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1", len(runs))
	}
	simRuns.Store(simKey{d, c}, runs[0])
	return runs[0]
}

const simSize = 128 << 20 // a populate of 32768 pages

// zapMachine is simMachine with a zap_page that makes the busy process's
// munmap of simSize cost zap.
func zapMachine(zap time.Duration) machine.Description {
	d := simMachine
	d.Costs.ZapPage = machine.Cost{NS: float64(zap) / float64(simSize/4096), Source: "test"}
	return d
}

// simPopulateMs is the cost of populating simSize on simMachine: one
// populate_page per 4 KiB page, some 10 ms, longer than the grace period
// (2 ms at HZ=1000) a register waits for first.
var simPopulateMs = float64(simSize/4096) * simMachine.Costs.PopulatePage.NS / 1e6

// The busy process's hold is its populate's cost on the machine: one
// populate_page per 4 KiB page, and the mmap lock's own cache-line
// hand-offs and the RCU callbacks that run on its CPU meanwhile (at a
// cond_resched() of the populate), a fraction of a percent.
func TestSimBusyHoldIsThePopulateCost(t *testing.T) {
	for _, d := range kernel.Designs.Values() {
		r := simRun(t, d, CaseBusyMaps)
		if r.BusyHoldMs < simPopulateMs || r.BusyHoldMs > simPopulateMs*1.01 {
			t.Errorf("%s: busy hold %v ms, want %d pages x %v ns = %v ms and the lock's hand-offs", d, r.BusyHoldMs, simSize/4096,
				simMachine.Costs.PopulatePage.NS, simPopulateMs)
		}
	}
}

// Before: a fork that starts while register_for_each_vma sleeps on the
// busy process's mmap lock waits for it on dup_mmap_sem, for most of a
// populate. After: the register still waits for the populate, but no
// fork does.
func TestSimForkWaitsForThePopulateOnlyBefore(t *testing.T) {
	for _, c := range []string{CaseBusyMaps, CaseBusyForks} {
		before := simRun(t, kernel.DesignBefore, c)
		if before.ForkMaxMs < simPopulateMs/2 || before.ForkSemMs < simPopulateMs/2 {
			t.Errorf("%s before: longest fork %v ms (blocked on dup_mmap_sem %v ms), populate %v ms: want a fork stalled for most of it",
				c, before.ForkMaxMs, before.ForkSemMs, simPopulateMs)
		}
		after := simRun(t, kernel.DesignAfter, c)
		if after.ForkMaxMs >= simPopulateMs/2 || after.ForkMmapMs != 0 {
			t.Errorf("%s after: longest fork %v ms (blocked on mmap_lock %v ms), populate %v ms: want no fork stalled by it",
				c, after.ForkMaxMs, after.ForkMmapMs, simPopulateMs)
		}
		if after.Forks == 0 || after.Passes < 2 {
			t.Errorf("%s after: %d forks, %d passes in the windows", c, after.Forks, after.Passes)
		}
	}
}

// The register waits for the busy process's populate where the busy
// process maps the file (its mm's lock), in both designs; where it only
// forks, only before (its fork holds dup_mmap_sem while it waits).
func TestSimAttachWaitsForThePopulate(t *testing.T) {
	for _, c := range []struct {
		design kernel.Design
		cs     string
		waits  bool
	}{
		{kernel.DesignBefore, CaseBusyMaps, true},
		{kernel.DesignAfter, CaseBusyMaps, true},
		{kernel.DesignBefore, CaseBusyForks, true},
		{kernel.DesignAfter, CaseBusyForks, false},
	} {
		r := simRun(t, c.design, c.cs)
		if waited := r.AttachMs >= simPopulateMs/2; waited != c.waits {
			t.Errorf("%s %s: attach %v ms, populate %v ms: waited %v, want %v", c.design, c.cs, r.AttachMs, simPopulateMs, waited, c.waits)
		}
	}
}

// With nobody busy, the register's walk over the mms that map the file
// takes at least a page copy each (the breakpoint write's COW), and forks
// wait for it on dup_mmap_sem alike in both designs.
func TestSimIdleRegisterCopiesAPagePerMM(t *testing.T) {
	perPage := simMachine.Costs.PopulatePage.NS / 1e6
	before := simRun(t, kernel.DesignBefore, CaseIdle1000)
	after := simRun(t, kernel.DesignAfter, CaseIdle1000)
	for _, r := range []Run{before, after} {
		if r.AttachMs < 1000*perPage || r.ForkSemMs == 0 {
			t.Errorf("idle-1000: attach %v ms (want at least 1000 page copies, %v ms), fork blocked on dup_mmap_sem %v ms",
				r.AttachMs, 1000*perPage, r.ForkSemMs)
		}
	}
	if before.ForkMaxMs != after.ForkMaxMs {
		t.Errorf("idle-1000: longest fork %v ms before, %v ms after: want the same", before.ForkMaxMs, after.ForkMaxMs)
	}
}

// simModel runs busy-maps multi-1 with a 16 MiB populate through Model on
// simMachine with seed and returns the results and the table.
func simModel(t *testing.T, seed uint64) ([]Result, string) {
	t.Helper()
	o := parse(t, "--runs", "1", "--size", "16M", "--cases", "busy-maps", "--modes", "multi-1")
	env := experiment.Env{Target: experiment.Sim, Sim: &experiment.SimRun{Seed: seed, Until: time.Minute}, Machine: simMachine,
		Variants: Def.Variants, Progress: func(string, ...any) {}}
	var rs []Result
	if err := Model(context.Background(), o, env, func(r Result) { rs = append(rs, r) }); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	Table(&out, o, rs)
	return rs, out.String()
}

// Sim results are the sim target's, name their machine, and carry the
// model's figures; the same machine and seed give the same results.
func TestSimModelDeterministic(t *testing.T) {
	rs, table := simModel(t, 1)
	if len(rs) != 2 {
		t.Fatalf("%d results, want 2", len(rs))
	}
	for _, r := range rs {
		if r.Target != experiment.Sim || r.Machine != "epyc-vm-32" || r.ModelFigures == nil || r.GCs != 0 {
			t.Errorf("result %+v", r)
		}
	}
	if !strings.Contains(table, "forkstall, sim on epyc-vm-32, virtual time (median of 1 runs; ms)") {
		t.Errorf("table:\n%s", table)
	}
	again, table2 := simModel(t, 1)
	a, _ := json.Marshal(rs)
	b, _ := json.Marshal(again)
	if string(a) != string(b) || table != table2 {
		t.Errorf("two runs of seed 1 differ:\n%s\n%s", a, b)
	}
}

// Why a register before waits two populates, not one: the populate's read
// unlock wakes the queued register, which runs a wakeup later (4.05 us on
// simMachine); the busy process meanwhile takes its lock for munmap and
// mmap and the next populate (two syscalls: munmap's zap costs nothing on
// simMachine), since a writer waiting sets RWSEM_FLAG_HANDOFF only when it
// runs and finds the lock taken. A zap that holds the lock longer than the wake-up
// lets the register set the handoff bit: it then waits one populate and
// the zap.
func TestSimZapDecidesOneOrTwoPopulates(t *testing.T) {
	run := func(d machine.Description) Run {
		runs, err := runCaseSim(context.Background(), caseRun{Machine: d, Design: kernel.DesignBefore, Case: CaseBusyMaps, Mode: ModeMulti1, Runs: 1,
			Size: simSize, Hold: time.Millisecond}, kernel.Sim{Seed: 1, Until: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return runs[0]
	}
	r0 := run(simMachine)
	t.Logf("no zap: attach %v ms, blocked on mmap_lock %v ms, longest fork %v ms", r0.AttachMs, r0.AttachMmapMs, r0.ForkMaxMs)
	if r := r0; r.AttachMmapMs < 1.5*simPopulateMs {
		t.Errorf("no zap cost: the register waited %v ms on mmap_lock, want two populates of %v ms", r.AttachMmapMs, simPopulateMs)
	}
	zap := 100 * time.Microsecond
	r1 := run(zapMachine(zap))
	t.Logf("zap %v: attach %v ms, blocked on mmap_lock %v ms, longest fork %v ms", zap, r1.AttachMs, r1.AttachMmapMs, r1.ForkMaxMs)
	if r := r1; r.AttachMmapMs > 1.5*simPopulateMs || r.AttachMmapMs < simPopulateMs/2 {
		t.Errorf("zap %v: the register waited %v ms on mmap_lock, want one populate of %v ms and the zap", zap, r.AttachMmapMs, simPopulateMs)
	}
}

// With a zap that lets each register set the handoff bit, before, each of
// multi-4's four registers waits a populate: register k+1's
// percpu_down_write waits for the forker, which register k's up_write
// handed dup_mmap_sem and which runs a wakeup later, as does the busy
// process, which meanwhile takes its lock again. After, no forker waits on
// dup_mmap_sem, so register k+1 finds the busy mm's lock free at once (the
// tracer's path between two registers has no cost on the machine) and
// waits no populate.
func TestSimAfterRegistersBeatTheBusyProcess(t *testing.T) {
	attach := map[kernel.Design]float64{}
	for _, d := range kernel.Designs.Values() {
		runs, err := runCaseSim(context.Background(), caseRun{Machine: zapMachine(100 * time.Microsecond), Design: d, Case: CaseBusyMaps, Mode: ModeMulti4, Runs: 1,
			Size: simSize, Hold: time.Millisecond}, kernel.Sim{Seed: 1, Until: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		attach[d] = runs[0].AttachMmapMs
	}
	t.Logf("multi-4 tracer blocked on mmap_lock: before %v ms, after %v ms; a populate %v ms", attach[kernel.DesignBefore], attach[kernel.DesignAfter], simPopulateMs)
	if attach[kernel.DesignBefore] < 3.5*simPopulateMs || attach[kernel.DesignAfter] > 1.5*simPopulateMs {
		t.Errorf("multi-4 tracer blocked on mmap_lock: before %v ms, after %v ms: want four populates of %v ms before and one after",
			attach[kernel.DesignBefore], attach[kernel.DesignAfter], simPopulateMs)
	}
}

// Under preemption none a busy process that loops its system calls still
// gives way at each return to user mode: on a 2-CPU machine the forker and
// the tracer share a CPU with it, and the run ends with its windows timed.
func TestSimPreemptNoneGivesWayAtReturnToUser(t *testing.T) {
	d := machine.MustNamed("x86-64")
	d.Kernel.Preempt = "none"
	runs, err := runCaseSim(context.Background(), caseRun{Machine: d, Design: kernel.DesignBefore, Case: CaseBusyMaps, Mode: ModeMulti1, Runs: 1,
		Size: 16 << 20, Hold: time.Millisecond}, kernel.Sim{Seed: 1, Until: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].AttachMs <= 0 {
		t.Fatalf("runs %+v", runs)
	}
}
