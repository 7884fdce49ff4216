package replay

import (
	"context"
	"io"
	"strings"
	"testing"

	live "mmlab/live/replay"
	"mmlab/machine"
	"mmlab/trace"
)

// Programs that did not come from Parse and break its rules are refused by
// both targets with the same error, before anything runs.
func TestTargetsRefuseProgramsAlike(t *testing.T) {
	bad := []func(p *trace.Program){
		func(p *trace.Program) { p.Ops[0].Addr = 0x7f0000000000 },                   // outside the arena
		func(p *trace.Program) { p.ArenaLo, p.ArenaHi = 0x1000, trace.MaxUserAddr }, // over the process's own mappings
		func(p *trace.Program) { p.Ops[0].Fixed = false },                           // neither fixed nor noreplace
		func(p *trace.Program) { p.Ops = append(p.Ops, trace.Op{Kind: trace.OpExit}) },
	}
	for i, f := range bad {
		p, err := trace.Parse(strings.NewReader("mmap 0x100000000000 4K rw- private,fixed\n"))
		if err != nil {
			t.Fatal(err)
		}
		f(p)
		merr := Run(context.Background(), machine.Host().Features, p, io.Discard)
		lerr := live.Run(context.Background(), p, io.Discard)
		if merr == nil || lerr == nil || merr.Error() != lerr.Error() {
			t.Errorf("case %d: model %v, live %v; want the same error", i, merr, lerr)
		}
	}
}
