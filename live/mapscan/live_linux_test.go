package mapscan

import (
	"context"
	"runtime"
	"testing"
	"time"

	"mmlab/experiment/mapscan"
)

// Each case runs against the kernel: the mapper times calls and the
// scanners finish passes; no helper process is left behind.
func TestRunLive(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("the helpers use CPUs 0 and 1: this machine has one")
	}
	for _, c := range mapscan.Cases {
		st, err := Run(context.Background(), mapscan.Options{Scanners: c, Duration: 200 * time.Millisecond, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %+v", c, st)
		if st.Ops == 0 || st.MmapOps == 0 || st.MunmapOps == 0 {
			t.Errorf("%s: the mapper timed no calls: %+v", c, st)
		}
		if (c == "none") != (st.ScanPasses == 0) {
			t.Errorf("%s: %d scan passes", c, st.ScanPasses)
		}
	}
}

// A cancelled run returns promptly and kills its helpers.
func TestRunLiveCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, mapscan.Options{Scanners: "text", Duration: time.Hour}); err == nil {
		t.Fatal("a cancelled run succeeded")
	}
}
