package uprobes

import (
	"testing"

	"mmlab/mm"
)

// setWaitedHook sets hooks.waited to f until the test ends.
func setWaitedHook(t testing.TB, f func(m *mm.MM)) {
	hooks.waited = f
	t.Cleanup(func() { hooks.waited = nil })
}

// setTextWriteHook sets hooks.textWrite for the test.
func setTextWriteHook(t *testing.T, fn func(m *mm.MM, vaddr uint64, n int)) {
	hooks.textWrite = fn
	t.Cleanup(func() { hooks.textWrite = nil })
}

// Mutations of the after design, by seed 000's patch.
const (
	MutRegisterTrylock = "register-trylock" // patch 5
	MutKilledRemoval   = "killed-removal"   // patch 8
	MutFinishHalfway   = "finish-halfway"   // patch 3
	MutNoWarn          = "no-warn"          // patch 4
	MutPutOutside      = "put-outside"      // patch 2
)

// UndoFix undoes the fix named mut until the test ends.
func UndoFix(t testing.TB, mut string) {
	p := map[string]*bool{MutRegisterTrylock: &hooks.undoTrylock, MutKilledRemoval: &hooks.undoKilledRemoval,
		MutFinishHalfway: &hooks.undoFinish, MutNoWarn: &hooks.undoNoWarn, MutPutOutside: &hooks.undoPutOutside}[mut]
	if p == nil {
		t.Fatalf("no mutation %q", mut)
	}
	*p = true
	t.Cleanup(func() { *p = false })
}
