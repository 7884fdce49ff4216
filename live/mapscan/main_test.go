package mapscan

import (
	"os"
	"testing"

	"mmlab/live"
)

// TestMain lets the test binary run the helper roles when Run re-executes
// it.
func TestMain(m *testing.M) {
	live.RunRole()
	os.Exit(m.Run())
}
