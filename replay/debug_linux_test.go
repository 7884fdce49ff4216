package replay

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	live "mmlab/live/replay"
	"mmlab/machine"

	"mmlab/mm"
	"mmlab/trace"
)

func TestDebugTrace(t *testing.T) {
	path := os.Getenv("DBG_TRACE")
	if path == "" {
		t.Skip()
	}
	f, _ := os.Open(path)
	p, err := trace.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	after := func(m *mm.MM, op *trace.Op) {
		fmt.Printf("after line %d %v:\n", op.Line, op.Kind)
		for _, v := range m.VMAs() {
			fmt.Printf("   %x-%x %v flags=%x pgoff=%x anon=%p chain=%d\n", v.Start, v.End, v.Flags, uint64(v.Flags), v.Pgoff, v.AnonVMA, v.ChainLen())
		}
	}
	runHooked(t.Context(), machine.Host().Features, mm.Config{GapFix: mm.GapFixNone}, p, os.Stdout, after)
}

// TestDebugCompare replays every *.trace in $DBG_DIR on both targets and
// prints the differences (a tool for hunting disagreements; skipped
// otherwise).
func TestDebugCompare(t *testing.T) {
	dir := os.Getenv("DBG_DIR")
	if dir == "" {
		t.Skip()
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "*.trace"))
	for _, path := range paths {
		f, _ := os.Open(path)
		p, err := trace.Parse(f)
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		var want, got bytes.Buffer
		if err := live.Run(t.Context(), p, &want); err != nil {
			t.Fatal(err)
		}
		if err := Run(t.Context(), machine.Host().Features, p, &got); err != nil {
			t.Fatal(err)
		}
		if d := trace.Diff(want.String(), got.String()); d != "" {
			t.Errorf("%s:\n%s", path, d)
		} else {
			t.Logf("%s: same", path)
		}
	}
}
