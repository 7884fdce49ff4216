package uprobes

import (
	"testing"

	"mmlab/mm"
)

// setWaitedHook sets u's hooks.waited to f.
func (u *Uprobes) setWaitedHook(f func(m *mm.MM)) { u.hooks.waited = f }

// setTextWriteHook sets u's hooks.textWrite to fn (nil: none).
func (u *Uprobes) setTextWriteHook(fn func(m *mm.MM, vaddr uint64, n int)) { u.hooks.textWrite = fn }

// Mutations of the after design, by seed 000's patch.
const (
	MutRegisterTrylock = "register-trylock" // patch 5
	MutKilledRemoval   = "killed-removal"   // patch 8
	MutFinishHalfway   = "finish-halfway"   // patch 3
	MutNoWarn          = "no-warn"          // patch 4
	MutPutOutside      = "put-outside"      // patch 2
)

// UndoFix undoes the fix named mut in u.
func UndoFix(t testing.TB, u *Uprobes, mut string) {
	h := &u.hooks
	p := map[string]*bool{MutRegisterTrylock: &h.undoTrylock, MutKilledRemoval: &h.undoKilledRemoval,
		MutFinishHalfway: &h.undoFinish, MutNoWarn: &h.undoNoWarn, MutPutOutside: &h.undoPutOutside}[mut]
	if p == nil {
		t.Fatalf("no mutation %q", mut)
	}
	*p = true
}
