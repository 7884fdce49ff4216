package replay

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"testing"

	live "mmlab/live/replay"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/trace"
)

var (
	seedLo   = flag.Int64("seeds.lo", 1, "first generator seed of the differential test")
	seeds    = flag.Int("seeds", 200, "number of generated traces the differential test replays on both targets")
	genOps   = flag.Int("gen.ops", 0, "ops per generated trace (0: the generator's default)")
	genPages = flag.Int("gen.pages", 0, "pages in the generator's window (0: its default)")
)

// TestDifferential generates traces and asserts that the model prints exactly
// what the live kernel prints (maps lines compared as START-END PERMS OFFSET
// NAME, plus peek and error lines).
func TestDifferential(t *testing.T) {
	if testing.Short() {
		*seeds = min(*seeds, 20)
	}
	compareTargets(t, "basic", *seedLo, *seeds, trace.GenOptions{Ops: *genOps, Pages: *genPages})
}

// compareTargets replays the traces of seeds lo..lo+n-1 generated with opt on
// the live kernel and on the model in every design of mm.GapFixes (which
// must all give the kernel's output) and fails on the first three that
// differ.
func compareTargets(t *testing.T, name string, lo int64, n int, opt trace.GenOptions) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the live target needs root")
	}
	ctx := context.Background()
	failed, ops, lines := 0, 0, 0
	defer func() {
		t.Logf("%s seeds %d..%d: %d ops, %d output lines compared, %d traces differ",
			name, lo, lo+int64(n)-1, ops, lines, failed)
	}()
	for s := lo; s < lo+int64(n); s++ {
		p := trace.Generate(s, opt)
		ops += len(p.Ops)
		var want bytes.Buffer
		if err := live.Run(ctx, p, &want); err != nil {
			if errors.Is(err, live.ErrNoCompiler) {
				t.Skip(err)
			}
			t.Fatalf("seed %d: live: %v", s, err)
		}
		lines += bytes.Count(want.Bytes(), []byte("\n"))
		for _, g := range mm.GapFixes.Values() {
			var got bytes.Buffer
			if err := RunWith(ctx, machine.Host().Features, mm.Config{GapFix: g}, p, &got); err != nil {
				t.Fatalf("seed %d: model (%s): %v", s, g, err)
			}
			if d := trace.Diff(want.String(), got.String()); d != "" {
				failed++
				t.Errorf("seed %d: model (%s) differs from live:\n%s\ntrace:\n%s", s, g, d, p.String())
				if failed >= 3 {
					t.FailNow()
				}
			}
		}
	}
}
