package trigger

import (
	"context"
	"errors"
	"testing"

	"mmlab/experiment"
	"mmlab/experiment/trigger"
	"mmlab/live/livetest"
)

// The case without a probe runs once, under attach "none"; a probed case
// once per attach mode, each call a hit.
func TestRun(t *testing.T) {
	livetest.NeedUprobes(t)
	o := livetest.Options(t, trigger.NewOptions(), "--cpus", "1", "--cases", "nop,uprobe-nop", "--warmup", "10ms", "--duration", "40ms", "--interval", "20ms")
	var rs []trigger.Result
	if err := Run(context.Background(), o, livetest.Quiet, func(r trigger.Result) { rs = append(rs, r) }); err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"none", "nop"}, {"uprobe_multi", "uprobe-nop"}, {"perf", "uprobe-nop"}}
	if len(rs) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(rs), len(want), rs)
	}
	for i, r := range rs {
		if r.Target != experiment.Live || r.Variant != experiment.VariantKernel || r.Attach != want[i][0] || r.Case != want[i][1] ||
			len(r.MopsRuns) != 2 || r.Calls == 0 || (r.Case != "nop" && r.Hits != r.Calls) {
			t.Errorf("result %d: %+v", i, r)
		}
	}
}

// An interrupted run stops with the context's error and emits nothing
// unfinished.
func TestRunStopsOnCancel(t *testing.T) {
	livetest.NeedUprobes(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o := livetest.Options(t, trigger.NewOptions(), "--cpus", "2", "--cases", "uprobe-nop", "--duration", "1h")
	n := 0
	if err := Run(ctx, o, livetest.Quiet, func(trigger.Result) { n++ }); !errors.Is(err, context.Canceled) || n != 0 {
		t.Errorf("Run on a cancelled context: %v, %d results", err, n)
	}
}
