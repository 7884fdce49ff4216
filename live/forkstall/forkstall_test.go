package forkstall

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"mmlab/experiment/forkstall"
	"mmlab/live"
	"mmlab/live/livetest"
)

// TestMain lets the test binary run the helper roles when Run re-executes it.
func TestMain(m *testing.M) { live.RunTests(m) }

// Where the experiment cannot run (not Linux, not root), Run says so with
// an error wrapping live.ErrNotSupported, before it starts anything.
func TestRunNotSupported(t *testing.T) {
	if runtime.GOOS == "linux" && live.IsRoot() {
		t.Skip("the experiment runs here")
	}
	o := livetest.Options(t, forkstall.Def.NewOptions())
	err := Run(context.Background(), o, livetest.Quiet, func(forkstall.Result) { t.Error("a result") })
	if !errors.Is(err, live.ErrNotSupported) {
		t.Errorf("Run = %v, want an error wrapping live.ErrNotSupported", err)
	}
}
