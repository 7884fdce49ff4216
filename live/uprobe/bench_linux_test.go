package uprobe

import (
	"context"
	"testing"

	"mmlab/uapi"
)

// benchHit measures one call of target on one thread, with a probe attached
// as mode and ret say, or none when probed is false: ns per hit.
func benchHit(b *testing.B, target string, probed bool, mode string, ret bool) {
	if probed {
		if err := Supported(); err != nil {
			b.Skip(err)
		}
	}
	tg, err := LookupTarget(target)
	if err != nil {
		b.Skip(err)
	}
	if probed {
		p, err := Attach(context.Background(), Spec{Path: tg.Path, Offsets: []uint64{tg.Offset}, Mode: mode, Ret: ret})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		b.ResetTimer()
		defer func() {
			b.StopTimer()
			if h, err := p.Hits(); err != nil || h < uint64(b.N) {
				b.Errorf("hits %d (%v) for %d calls", h, err, b.N)
			}
		}()
	}
	callLoop(tg.PC, uint64(b.N))
}

func BenchmarkNop(b *testing.B)               { benchHit(b, "nop", false, "", false) }
func BenchmarkUprobeNopMulti(b *testing.B)    { benchHit(b, "nop", true, uapi.AttachMulti, false) }
func BenchmarkUprobeNopPerf(b *testing.B)     { benchHit(b, "nop", true, uapi.AttachPerf, false) }
func BenchmarkUretprobeNopMulti(b *testing.B) { benchHit(b, "nop", true, uapi.AttachMulti, true) }
func BenchmarkUprobeRetMulti(b *testing.B)    { benchHit(b, "ret", true, uapi.AttachMulti, false) }
func BenchmarkUprobeNop5Multi(b *testing.B)   { benchHit(b, "nop5", true, uapi.AttachMulti, false) }
