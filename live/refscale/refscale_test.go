package refscale

import (
	"context"
	"errors"
	"testing"

	"mmlab/experiment"
	"mmlab/experiment/refscale"
	"mmlab/machine"
)

// Whatever the kernel has, the live target runs nothing and says why.
func TestRunNotSupported(t *testing.T) {
	err := Run(context.Background(), refscale.Def.NewOptions(), experiment.Env{Target: experiment.Live}, func(refscale.Result) { t.Error("a result") })
	if !errors.Is(err, machine.ErrNotSupported) {
		t.Fatalf("error %v, want ErrNotSupported", err)
	}
	t.Log(err)
}
