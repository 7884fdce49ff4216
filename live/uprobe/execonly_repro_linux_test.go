package uprobe_test

import (
	"testing"

	"mmlab/live/livetest"
	"mmlab/machine"
)

// The C reproducer (docs/repro/stray-int3-execonly.c) finds what
// TestLiveStrayBreakpointExecOnly finds, with a perf uprobe instead of a
// uprobe_multi link: it exits 1 (the execute-only int3 restarted without a
// signal) on a machine with protection keys and 0 (every int3 raised
// SIGTRAP) on one without; 2 (its setup failed, say without the uprobe
// PMU) skips.
func TestLiveStrayInt3Reproducer(t *testing.T) {
	livetest.NeedUprobes(t)
	bin := livetest.BuildC(t, "../../docs/repro/stray-int3-execonly.c", "-O2", "-Wall")
	out, code := livetest.Run(t, bin)
	want := 0
	if machine.Host().Features.OSPKE {
		want = 1
	}
	t.Logf("protection keys (ospke): %v; exit %d\n%s", want == 1, code, out)
	if code == 2 {
		t.Skipf("the reproducer cannot run here: %s", out)
	}
	if code != want {
		t.Errorf("exit %d, want %d", code, want)
	}
}
