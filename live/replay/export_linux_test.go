package replay

import "testing"

// setInputHook rewrites the helper's input of each attempt for the rest of
// the test.
func setInputHook(t *testing.T, f func(attempt int, in []byte) []byte) {
	hooks.input = f
	t.Cleanup(func() { hooks.input = nil })
}
