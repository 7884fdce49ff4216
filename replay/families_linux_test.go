package replay

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"testing"

	live "mmlab/live/replay"
	"mmlab/trace"
)

var familySeeds = flag.Int("family.seeds", 80, "generated traces per harder family the differential test replays on both targets")

// TestDifferentialFamilies replays the same fixed set of traces of every
// harder generator family (seeds 1..80 of each, 560 traces) on the model and
// on the live kernel and requires the same output, as TestDifferential does
// for the basic family.
func TestDifferentialFamilies(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the live target needs root")
	}
	ctx := context.Background()
	for _, fam := range trace.Families[1:] {
		t.Run(fam.Name, func(t *testing.T) {
			failed, ops, lines := 0, 0, 0
			for s := int64(1); s <= int64(*familySeeds); s++ {
				p := trace.Generate(s, trace.GenOptions{Family: fam.Name})
				ops += len(p.Ops)
				var want, got bytes.Buffer
				if err := live.Run(ctx, p, &want); err != nil {
					if errors.Is(err, live.ErrNoCompiler) {
						t.Skip(err)
					}
					t.Fatalf("seed %d: live: %v", s, err)
				}
				if err := Run(ctx, p, &got); err != nil {
					t.Fatalf("seed %d: model: %v", s, err)
				}
				lines += bytes.Count(want.Bytes(), []byte("\n"))
				if d := trace.Diff(want.String(), got.String()); d != "" {
					failed++
					t.Errorf("seed %d: model differs from live:\n%s\ntrace:\n%s", s, d, p)
					if failed >= 3 {
						t.FailNow()
					}
				}
			}
			t.Logf("%s seeds 1..%d: %d ops, %d output lines compared, %d traces differ", fam.Name, *familySeeds, ops, lines, failed)
		})
	}
}
