package uprobe

import (
	"context"
	"fmt"
	"testing"
	"time"

	"mmlab/uapi"
)

// TestTriggerCountsEveryCall runs each case briefly on one and two CPUs in
// both attach modes: every call the producers count must be a BPF hit.
func TestTriggerCountsEveryCall(t *testing.T) {
	needLive(t)
	// The cases of the kernel's bench trig-*: the bare nop, a uprobe and
	// a uretprobe on it, a uprobe on a ret and on a nop5.
	for _, c := range []struct {
		name, target string
		probed, ret  bool
	}{{"nop", "nop", false, false}, {"uprobe-nop", "nop", true, false}, {"uretprobe-nop", "nop", true, true},
		{"uprobe-ret", "ret", true, false}, {"uprobe-nop5", "nop5", true, false}} {
		for _, mode := range []string{uapi.AttachMulti, uapi.AttachPerf} {
			if !c.probed && mode == uapi.AttachPerf {
				continue
			}
			for _, cpus := range []int{1, 2} {
				t.Run(fmt.Sprintf("%s/%v/%d", c.name, mode, cpus), func(t *testing.T) {
					cfg := TriggerConfig{Target: c.target, Probed: c.probed, Ret: c.ret, Mode: mode, CPUs: cpus,
						Warmup: 50 * time.Millisecond, Interval: 50 * time.Millisecond, Duration: 100 * time.Millisecond}
					res, err := Trigger(context.Background(), cfg)
					if err != nil {
						t.Fatal(err)
					}
					if len(res.Samples) != 2 {
						t.Errorf("%d samples, want 2", len(res.Samples))
					}
					for _, s := range res.Samples {
						if s < 0 {
							t.Errorf("sample %v", s)
						}
					}
					// Each producer makes at least one whole batch.
					if res.Calls < uint64(cpus)*batch || res.Calls%batch != 0 {
						t.Errorf("calls = %d, want a multiple of %d, at least %d of them", res.Calls, batch, cpus)
					}
					if c.probed && res.Hits != res.Calls {
						t.Errorf("hits %d != calls %d", res.Hits, res.Calls)
					}
					// Detach restored the probed instruction, even a nop5
					// the kernel had turned into a call to its trampoline.
					tg := target(t, c.target)
					mem := make([]byte, len(tg.Code))
					if err := readAt("/proc/self/mem", mem, int64(tg.PC)); err != nil {
						t.Fatal(err)
					}
					if string(mem) != string(tg.Code) {
						t.Errorf("after detach the target holds % x, want % x", mem, tg.Code)
					}
				})
			}
		}
	}
}

func TestTriggerStopsOnCancel(t *testing.T) {
	needLive(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Trigger(ctx, TriggerConfig{Target: "nop", Probed: true, Mode: uapi.AttachMulti, CPUs: 1, Duration: time.Hour})
	if err != context.Canceled {
		t.Errorf("Trigger on a cancelled context: %v", err)
	}
	nop := target(t, "nop")
	if b := memByte(t, nop.PC); b != 0x90 {
		t.Errorf("nop target holds %#x after a cancelled run", b)
	}
}
