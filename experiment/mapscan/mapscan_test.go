package mapscan

import (
	"context"
	"testing"
	"time"

	"mmlab/procfs"
)

func TestRunModelSmoke(t *testing.T) {
	for _, v := range []procfs.Variant{procfs.Before, procfs.After} {
		for _, c := range Cases {
			st, err := RunModel(context.Background(), v, Options{Scanners: c, Duration: 300 * time.Millisecond, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s %s: %+v", v, c, st)
		}
	}
}
