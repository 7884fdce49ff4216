package uprobe

import (
	"context"
	"testing"

	"mmlab/uapi"
)

// The red-zone target on the live kernel: without a probe and with one on
// its one-byte nop (an int3 at every hit) no call finds a word changed;
// with one on its nop5, on a kernel with optimized uprobes (6.18+), every
// call after the first (the int3 hit that optimizes the site) finds the
// four words under the call's return address changed: the mask the model's
// call design gives (uprobes.TestRedZone), for a perf and a uprobe_multi
// uprobe alike.
func TestLiveRedZone(t *testing.T) {
	needLive(t)
	const calls = 1000
	run := func(site, mode string) RedZoneResult {
		t.Helper()
		res, err := RedZone(context.Background(), RedZoneConfig{Site: site, Mode: mode, Calls: calls / 5, Samples: 5})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%q %v: %d of %d calls corrupted, mask %#x", site, mode, res.Corrupted, res.Calls, res.Mask)
		return res
	}
	if r := run(RedZoneNone, uapi.AttachMulti); r.Corrupted != 0 || r.Calls != calls {
		t.Errorf("no probe: %+v", r)
	}
	for _, mode := range []string{uapi.AttachMulti, uapi.AttachPerf} {
		if r := run(RedZoneNop, mode); r.Corrupted != 0 || r.Hits != calls {
			t.Errorf("probe on the nop: %+v", r)
		}
		r := run(RedZoneNop5, mode)
		optimized := HasOptimizedUprobes()
		want := RedZoneResult{Corrupted: calls - 1, Mask: 0x0f}
		if !optimized {
			want = RedZoneResult{}
		}
		if r.Corrupted != want.Corrupted || r.Mask != want.Mask || r.Hits != calls {
			t.Errorf("probe on the nop5 (optimized uprobes %v): %d corrupted, mask %#x, %d hits; want %d, %#x, %d",
				optimized, r.Corrupted, r.Mask, r.Hits, want.Corrupted, want.Mask, calls)
		}
	}
}
