package smp_test

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"
	"weak"

	"mmlab/machine"
	"mmlab/sched"
	"mmlab/smp"
)

// counters runs two sim CPUs of xeon-gold-6138-2s (0 and 1: two cores of
// socket 0) that each add n times to one shared refcount and to a per-CPU
// counter of their own, with 20 ns of other work between two adds, and
// returns the run's profile and end.
func counters(t *testing.T, n int) (*smp.Profile, time.Duration) {
	t.Helper()
	d := machine.MustNamed("xeon-gold-6138-2s")
	sys := sched.New(sched.Config{CPUs: 2, Seed: 1, Sim: &sched.SimConfig{Until: time.Second, Machine: &d}})
	var ref smp.Int64
	ref.Init("uprobe.ref")
	var percpu [2]struct {
		n smp.Int64
		_ [56]byte
	}
	for i := range percpu {
		percpu[i].n.Init(fmt.Sprintf("percpu_counter[%d]", i))
	}
	for cpu := range 2 {
		sys.SpawnNamed(fmt.Sprintf("inc%d", cpu), cpu, 0, func(*sched.Thread) {
			for range n {
				ref.Add(1)
				percpu[cpu].n.Add(1)
				sched.Charge(20 * time.Nanosecond)
			}
		})
	}
	rec, err := sys.Run()
	if err != nil {
		t.Fatal(err)
	}
	if got := ref.Load(); got != int64(2*n) {
		t.Fatalf("refcount %d, want %d", got, 2*n)
	}
	return smp.C2C(sys), rec.End
}

// TestC2CRefcountVsPerCPU shows the profile of a shared refcount against
// per-CPU counters: the refcount's line moves on almost every add, each
// time between CPUs 0 and 1 at the same-socket cost, the per-CPU lines
// never move.
func TestC2CRefcountVsPerCPU(t *testing.T) {
	const n = 1000
	p, end := counters(t, n)
	var b bytes.Buffer
	p.Format(&b)
	t.Logf("end %v\n%s", end, b.String())
	if len(p.Lines) != 1 || p.Lines[0].Name != "uprobe.ref" {
		t.Fatalf("moved lines %+v, want uprobe.ref alone", p.Lines)
	}
	l := p.Lines[0]
	if l.RMWs != 2*n || l.Transfers < n || l.Transfers > 2*n {
		t.Errorf("uprobe.ref: %d RMWs, %d transfers; want %d RMWs, %d..%d transfers", l.RMWs, l.Transfers, 2*n, n, 2*n)
	}
	if l.ByClass[smp.ClassLLC] != l.Transfers {
		t.Errorf("transfers by class %v, want all %v (two cores of one socket)", l.ByClass, smp.ClassLLC)
	}
	if l.From[0]+l.From[1] != l.Transfers {
		t.Errorf("transfers from %v", l.From)
	}
	if want := l.Transfers * 48; l.CostNS != want { // 47.5 ns rounded
		t.Errorf("cost %d ns, want %d", l.CostNS, want)
	}
	// The same run again is the same run.
	p2, end2 := counters(t, n)
	if end2 != end || p2.Lines[0].Transfers != l.Transfers || p2.Lines[0].WaitNS != l.WaitNS {
		t.Errorf("second run: end %v, %d transfers, %d ns queued; first %v, %d, %d", end2, p2.Lines[0].Transfers, p2.Lines[0].WaitNS, end, l.Transfers, l.WaitNS)
	}
}

// TestRealTime: outside a sim run a word is its sync/atomic value.
func TestRealTime(t *testing.T) {
	var w smp.Uint64
	w.Init("w")
	w.Store(3)
	if w.Add(2) != 5 || !w.CompareAndSwap(5, 7) || w.Swap(1) != 7 || w.Or(6) != 1 || w.And(2) != 7 || w.Load() != 2 {
		t.Fatal("Uint64 operations")
	}
	var p smp.Pointer[int]
	x := 1
	if p.Swap(&x) != nil || p.Load() != &x {
		t.Fatal("Pointer operations")
	}
	smp.Mb()
	if n := testing.AllocsPerRun(100, func() { w.Add(1); w.Load(); smp.Mb() }); n != 0 {
		t.Errorf("%v allocations per access", n)
	}
}

// A sim run's line state does not keep alive the object a line sits in:
// once the object is unreachable a collection frees it, while the profile
// still names its line (a child's mm gone before its parent's run ends).
func TestLineStateDoesNotKeepObject(t *testing.T) {
	d := machine.MustNamed("xeon-gold-6138-2s")
	sys := sched.New(sched.Config{CPUs: 2, Seed: 1, Sim: &sched.SimConfig{Until: time.Second, Machine: &d}})
	type object struct {
		line  smp.Line // embedded, as struct rw_semaphore's
		count smp.Int64
		_     [1 << 16]byte
	}
	var gone weak.Pointer[object]
	for cpu := range 2 {
		sys.SpawnNamed(fmt.Sprintf("cpu%d", cpu), cpu, 0, func(*sched.Thread) {
			if cpu == 0 {
				o := &object{}
				o.line.SetName("child")
				o.count.InitOn(&o.line, "count")
				gone = weak.Make(o)
				for range 10 {
					o.count.Add(1)
					sched.Charge(10 * time.Nanosecond)
				}
				return
			}
			sched.Charge(5 * time.Nanosecond)
		})
	}
	if _, err := sys.Run(); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	if gone.Value() != nil {
		t.Error("the object of an accessed line survives a collection after the run")
	}
	if p := smp.C2C(sys); len(p.Lines) > 0 && p.Lines[0].Name != "child" {
		t.Errorf("profile lines %+v", p.Lines)
	}
	runtime.KeepAlive(sys)
}

// Class c is machine.Distances[c]: the Costs field of a transfer at that
// distance.
func TestClassesAreMachineDistances(t *testing.T) {
	var _ [smp.NumClasses]string = machine.Distances
	for c := range smp.NumClasses {
		if got, want := "line_"+c.String(), machine.Distances[c]; got != want {
			t.Errorf("class %d is %s, machine.Distances has %s", c, got, want)
		}
	}
}
