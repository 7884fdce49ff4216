package replay

import (
	"fmt"
	"os"
	"testing"

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
	debugHook = func(m *mm.MM, op *trace.Op) {
		fmt.Printf("after line %d %v:\n", op.Line, op.Kind)
		for _, v := range m.VMAs() {
			fmt.Printf("   %x-%x %v flags=%x pgoff=%x anon=%p chain=%d\n", v.Start, v.End, v.Flags, uint64(v.Flags), v.Pgoff, v.AnonVMA, v.ChainLen())
		}
	}
	Run(t.Context(), p, os.Stdout)
}
