package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes the binary mmlabBinary built, so that the tests leave
// nothing outside their t.TempDir().
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}
