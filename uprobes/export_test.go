package uprobes

import (
	"testing"

	"mmlab/mm"
)

// setTextWriteHook sets hooks.textWrite for the test.
func setTextWriteHook(t *testing.T, fn func(m *mm.MM, vaddr uint64, n int)) {
	hooks.textWrite = fn
	t.Cleanup(func() { hooks.textWrite = nil })
}
