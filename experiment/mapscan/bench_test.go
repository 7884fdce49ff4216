package mapscan

import (
	"context"
	"testing"
	"time"

	"mmlab/procfs"
)

// BenchmarkModelTextScanners runs the model with two text scanners, one
// 1-second run per iteration, for each walk, and reports the mapper's mean
// and maximum call latency and its maximum lock wait per call (the seed's
// comparison: after should be about 10x lower in the maxima).
func BenchmarkModelTextScanners(b *testing.B) {
	for _, v := range []procfs.Variant{procfs.Before, procfs.After} {
		b.Run(v.String(), func(b *testing.B) {
			var meanSum, opMax, waitMax float64
			n := 0
			for b.Loop() {
				st, err := RunModel(context.Background(), v, RunSpec{Scanners: "text", Duration: time.Second, Seed: uint64(n + 1), BusyDuration: BusySpin, Preempt: procfs.PreemptFull})
				if err != nil {
					b.Fatal(err)
				}
				meanSum += st.OpMeanUS
				opMax = max(opMax, st.OpMaxUS)
				waitMax = max(waitMax, st.LockWaitMaxUS)
				n++
			}
			b.ReportMetric(meanSum/float64(n), "op_mean_us")
			b.ReportMetric(opMax, "op_max_us")
			b.ReportMetric(waitMax, "lock_wait_max_us")
		})
	}
}
