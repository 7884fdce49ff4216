package schedwait

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"mmlab/experiment"
	"mmlab/experiment/schedwait"
	"mmlab/live"
	"mmlab/live/tracefs"
	"mmlab/machine"
)

// TestMain lets the test binary run the helper role when Run re-executes it.
func TestMain(m *testing.M) { live.RunTests(m) }

func options(d time.Duration) *schedwait.Options {
	o := schedwait.Def.NewOptions()
	o.Duration = experiment.Duration(d)
	return o
}

// allChildren is every thread's children of this process.
func allChildren() []string {
	var pids []string
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		b, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		pids = append(pids, strings.Fields(string(b))...)
	}
	return pids
}

// A short live run and a sim run of the same options: one result each, in
// the shape the table reads, and nothing left behind (no trace instance,
// no helper).
func TestRunBoth(t *testing.T) {
	if !live.IsRoot() {
		t.Skip("needs root")
	}
	o := options(300 * time.Millisecond)
	var rs []schedwait.Result
	env := experiment.Env{Machine: machine.Host(), Progress: func(string, ...any) {}}
	if err := Run(context.Background(), o, env, func(r schedwait.Result) { rs = append(rs, r) }); err != nil {
		t.Fatal(err)
	}
	if err := schedwait.RunSim(context.Background(), o, env, func(r schedwait.Result) { rs = append(rs, r) }); err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Row != experiment.LiveRow || rs[0].Live == nil || rs[0].Sim != nil || rs[1].Sim == nil || rs[1].Live != nil {
		t.Fatalf("results %+v", rs)
	}
	for _, r := range rs {
		if r.Wakeups == 0 || r.ZeroShare < 0 || r.ZeroShare > 1 || r.P50US > r.P90US || r.P90US > r.P99US || r.P99US > r.MaxUS {
			t.Errorf("%s: %+v", r.Target, r)
		}
	}
	if l := rs[0].Live; l.HogLoops == 0 || l.Clean > rs[0].Wakeups {
		t.Errorf("live figures %+v", l)
	}
	if left := tracefs.Leftovers(); len(left) > 0 {
		t.Errorf("instances left: %v", left)
	}
	if c := allChildren(); len(c) > 0 {
		t.Errorf("children left: %v", c)
	}
}

// A run cancelled while it traces returns the context's error and leaves
// no instance and no helper.
func TestRunCancelled(t *testing.T) {
	if !live.IsRoot() {
		t.Skip("needs root")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := experiment.Env{Machine: machine.Host(), Progress: func(format string, _ ...any) {
		if strings.HasPrefix(format, "tracing") {
			cancel()
		}
	}}
	err := Run(ctx, options(time.Minute), env, func(schedwait.Result) { t.Error("a result from a cancelled run") })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want context.Canceled", err)
	}
	if left := tracefs.Leftovers(); len(left) > 0 {
		t.Errorf("instances left: %v", left)
	}
	if c := allChildren(); len(c) > 0 {
		t.Errorf("children left: %v", c)
	}
}
