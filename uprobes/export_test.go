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
