package kernel

import "testing"

// Mutations of the after design of dup_mm, by seed 000's patch.
const (
	MutTeardownOutside = "fork-teardown-outside" // patch 2
	MutForkTrylock     = "fork-trylock"          // patch 6
	MutEarlyMM         = "fork-early-mm"         // patch 7
)

// UndoFix undoes the fix named mut until the test ends.
func UndoFix(t testing.TB, mut string) {
	p := map[string]*bool{MutTeardownOutside: &hooks.undoTeardownOutside, MutForkTrylock: &hooks.undoTrylock,
		MutEarlyMM: &hooks.undoEarlyMM}[mut]
	if p == nil {
		t.Fatalf("no mutation %q", mut)
	}
	*p = true
	t.Cleanup(func() { *p = false })
}
