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
