package replay

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"mmlab/machine"
	"mmlab/trace"
)

// An arena above 2^47 runs on a machine with 5-level paging, where TASK_SIZE
// is 2^56 - 4096: fixed maps there succeed, a hint there is used
// (arch_get_unmapped_area_topdown()'s opt-in), and the last page below 2^56
// is TASK_SIZE's own, never mapped. On a 4-level machine both runners refuse
// the trace before it runs (trace.ValidateFor). No host at hand had la57:
// the expected output follows the v6.19 sources, without a live oracle.
func TestArenaAboveWindowLA57(t *testing.T) {
	t.Parallel()
	const src = `arena 0xfffffff0000000 0x100000000000000
mmap 0xfffffff0000000 8K rw- private,fixed
mmap 0xfffffff0004000 4K rw- private,hint
poke 0xfffffff0004000 9
peek 0xfffffff0004000
mmap 0xfffffffffff000 4K rw- private,fixed
maps
`
	p, err := trace.Parse(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	la57 := machine.MustNamed("x86-64-la57").Features
	var out bytes.Buffer
	if err := Run(context.Background(), la57, p, &out); err != nil {
		t.Fatal(err)
	}
	want := `peek 0xfffffff0004000 9
error 6 ENOMEM
fffffff0000000-fffffff0002000 rw-p 00000000 00:00 0 
fffffff0004000-fffffff0005000 rw-p 00000000 00:00 0 

`
	if d := trace.Diff(want, out.String()); d != "" {
		t.Errorf("la57:\n%s", d)
	}
	fourLevel := machine.MustNamed("x86-64-pku").Features
	err = Run(context.Background(), fourLevel, p, &out)
	if err == nil || !strings.Contains(err.Error(), "ends above this machine's user address space, 0x800000000000 (4-level paging)") {
		t.Errorf("4-level: Run = %v; want the arena refused", err)
	}
}
