package uprobe

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestTriggerCountsEveryCall runs each case briefly on one and two CPUs in
// both attach modes: every call the producers count must be a BPF hit.
func TestTriggerCountsEveryCall(t *testing.T) {
	needLive(t)
	for _, c := range AllCases {
		for _, mode := range []Mode{ModeMulti, ModePerf} {
			if c == CaseNop && mode == ModePerf {
				continue
			}
			for _, cpus := range []int{1, 2} {
				t.Run(fmt.Sprintf("%s/%v/%d", c, mode, cpus), func(t *testing.T) {
					cfg := TriggerConfig{Case: c, Mode: mode, CPUs: cpus,
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
					if c != CaseNop && res.Hits != res.Calls {
						t.Errorf("hits %d != calls %d", res.Hits, res.Calls)
					}
					// Detach restored the probed instruction, even a nop5
					// the kernel had turned into a call to its trampoline.
					name, _, _, _ := caseTarget(c)
					tg := target(t, name)
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
	_, err := Trigger(ctx, TriggerConfig{Case: CaseUprobeNop, CPUs: 1, Duration: time.Hour})
	if err != context.Canceled {
		t.Errorf("Trigger on a cancelled context: %v", err)
	}
	nop := target(t, "nop")
	if b := memByte(t, nop.PC); b != 0x90 {
		t.Errorf("nop target holds %#x after a cancelled run", b)
	}
}

func TestFormatTrigger(t *testing.T) {
	// Seed 004's lines, from their own mean and stddev.
	for _, tc := range []struct {
		name     string
		cpus     int
		mean, sd float64
		want     string
	}{
		{"uprobe-nop", 1, 3.396e6, 0.002e6, "uprobe-nop ( 1 cpus): 3.396 ± 0.002M/s ( 3.396M/s/cpu)"},
		{"uprobe-nop", 16, 7.615e6, 0.099e6, "uprobe-nop (16 cpus): 7.615 ± 0.099M/s ( 0.476M/s/cpu)"},
		{"uretprobe-nop", 8, 5.883e6, 0.002e6, "uretprobe-nop ( 8 cpus): 5.883 ± 0.002M/s ( 0.735M/s/cpu)"},
	} {
		if got := FormatTrigger(tc.name, tc.cpus, tc.mean, tc.sd); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}
