package kernel

import "testing"

// Mutations of the after design of dup_mm, by seed 000's patch.
const (
	MutTeardownOutside = "fork-teardown-outside" // patch 2
	MutForkTrylock     = "fork-trylock"          // patch 6
	MutEarlyMM         = "fork-early-mm"         // patch 7
)

// UndoFix undoes the fix named mut in the processes m makes from now on
// (NewTaskMMWith) and in their forks.
func UndoFix(t testing.TB, m *Machine, mut string) {
	p := map[string]*bool{MutTeardownOutside: &m.hooks.undoTeardownOutside, MutForkTrylock: &m.hooks.undoTrylock,
		MutEarlyMM: &m.hooks.undoEarlyMM}[mut]
	if p == nil {
		t.Fatalf("no mutation %q", mut)
	}
	*p = true
}
