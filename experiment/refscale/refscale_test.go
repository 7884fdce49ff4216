package refscale

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"mmlab/experiment"
	"mmlab/machine"
)

func run(t *testing.T, env experiment.Env, o *Options) []Result {
	t.Helper()
	env.Progress = func(string, ...any) {}
	var rs []Result
	if err := RunModel(context.Background(), o, env, func(r Result) { rs = append(rs, r) }); err != nil {
		t.Fatal(err)
	}
	return rs
}

func smallOptions() *Options {
	o := Def.NewOptions()
	o.Readers, o.Loops, o.Runs = []int{1, 2}, 50, 2
	return o
}

// checkStructure checks one result per (type, readers) in order, each with
// its runs and a figure.
func checkStructure(t *testing.T, o *Options, rs []Result, target experiment.Target) {
	t.Helper()
	if len(rs) != len(o.Types)*len(o.Readers) {
		t.Fatalf("%d results, want %d", len(rs), len(o.Types)*len(o.Readers))
	}
	i := 0
	for _, typ := range o.Types {
		for _, n := range o.Readers {
			r := rs[i]
			i++
			if r.Type != typ || r.Readers != n || r.Loops != o.Loops || r.Target != target || r.Variant != VariantModel {
				t.Errorf("result %d: %s %d readers %d loops on %s/%s, want %s %d readers %d loops on %s", i, r.Type, r.Readers, r.Loops, r.Target, r.Variant, typ, n, o.Loops, target)
			}
			if len(r.NsRuns) != o.Runs || r.NsPerOp <= 0 || r.NsPerOpStddev < 0 {
				t.Errorf("%s %d readers: %d runs, %v ± %v ns/op", r.Type, r.Readers, len(r.NsRuns), r.NsPerOp, r.NsPerOpStddev)
			}
		}
	}
}

func TestModel(t *testing.T) {
	o := smallOptions()
	rs := run(t, experiment.Env{Machine: machine.Host()}, o)
	checkStructure(t, o, rs, experiment.Model)
	var b strings.Builder
	Table(&b, o, rs)
	if lines := strings.Count(b.String(), "\n"); lines != len(rs)+1 {
		t.Errorf("table has %d lines, want %d:\n%s", lines, len(rs)+1, b.String())
	}
	if line, failed := Verdict(o, rs); failed || !strings.HasPrefix(line, "verdict: ") {
		t.Errorf("verdict %q, failed %v", line, failed)
	}
}

func simEnv(t *testing.T) experiment.Env {
	d, err := machine.Lookup("xeon-gold-6138-2s")
	if err != nil {
		t.Fatal(err)
	}
	return experiment.Env{Target: experiment.Sim, Machine: d, Sim: &experiment.SimRun{Seed: 1, Until: time.Minute}}
}

// The same machine and seed give the same results, to the JSON byte.
func TestSimDeterministic(t *testing.T) {
	o := smallOptions()
	a := run(t, simEnv(t), o)
	checkStructure(t, o, a, experiment.Sim)
	b := run(t, simEnv(t), o)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Errorf("two sim runs differ:\n%s\n%s", ja, jb)
	}
	for _, r := range a {
		if r.Machine != "xeon-gold-6138-2s" {
			t.Errorf("%s %d readers: machine %q", r.Type, r.Readers, r.Machine)
		}
	}
}

func TestSimTooManyReaders(t *testing.T) {
	env := simEnv(t)
	env.Progress = func(string, ...any) {}
	o := smallOptions()
	o.Readers = []int{env.Machine.Topology.CPUs + 1}
	if err := RunModel(context.Background(), o, env, func(Result) {}); err == nil || !strings.Contains(err.Error(), "--readers") {
		t.Errorf("error %v, want one naming --readers", err)
	}
}

func TestOptions(t *testing.T) {
	for _, args := range [][]string{
		{"--loops", "0"}, {"--runs", "0"}, {"--readers", "0"}, {"--readers", "65"}, {"--types", "rwlock"}, {"--types", ""},
	} {
		if err := experiment.ParseOptions(Def.NewOptions(), args...); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
	o := Def.NewOptions()
	if err := experiment.ParseOptions(o, "--types", "srcu,refcnt", "--readers", "4,1"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Types, []string{"srcu", "refcnt"}) || !slices.Equal(o.Readers, []int{4, 1}) {
		t.Errorf("parsed %v %v", o.Types, o.Readers)
	}
}

// Readers of one shared refcount interleave in virtual time: on two CPUs of
// one socket each atomic_inc/atomic_dec pair moves the line once (0.5
// transfers per access), and an operation costs about the other reader's
// transfer more than on one CPU, as a line serialises its requesters.
func TestSimRefcntInterleaves(t *testing.T) {
	o := smallOptions()
	o.Types, o.Loops = []string{TypeRefcnt}, 500
	rs := run(t, simEnv(t), o)
	one, two := rs[0], rs[1]
	if two.HotLine != "refscale.refcnt" || two.HotLinePerAccess < 0.45 || two.HotLinePerAccess > 0.55 {
		t.Errorf("2 readers: hot line %q at %.3f transfers per access, want refscale.refcnt at 0.5", two.HotLine, two.HotLinePerAccess)
	}
	xfer := simEnv(t).Machine.Costs.LineLLC.NS
	if d := two.NsPerOp - one.NsPerOp; d < xfer || d > 3*xfer {
		t.Errorf("ns/op %.1f on 1 reader, %.1f on 2: want the second to pay one to three %.1f ns transfers more", one.NsPerOp, two.NsPerOp, xfer)
	}
}

// Each CPU has a read_count of its own, as the kernel's percpu_rw_semaphore
// allocates one per possible CPU: on 64 CPUs no reader's counter moves
// between CPUs, and percpu_down_read()/percpu_up_read() cost less than one
// line transfer more than on one CPU (only block's line, read by every
// CPU once, moves at all).
func TestSimPercpuRWSemCounterPerCPU(t *testing.T) {
	o := smallOptions()
	o.Types, o.Readers, o.Runs = []string{TypePercpuRWSem}, []int{1, 64}, 1
	rs := run(t, simEnv(t), o)
	one, many := rs[0], rs[1]
	xfer := simEnv(t).Machine.Costs.LineLLC.NS
	if strings.Contains(many.HotLine, "read_count") || many.NsPerOp-one.NsPerOp >= xfer {
		t.Errorf("64 readers: %.3f ns/op, hot line %q at %.3f transfers per access; 1 reader: %.3f ns/op; want no read_count line moved and less than one %.1f ns transfer more",
			many.NsPerOp, many.HotLine, many.HotLinePerAccess, one.NsPerOp, xfer)
	}
}
