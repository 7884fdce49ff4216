package main

import (
	"context"

	"mmlab/live/maptear"
	modelmaptear "mmlab/procfs/maptear"
)

// The model target of 'mmlab run maptear': the tearing check on the model's
// before and after maps walks. With it built, the quick step of 'mmlab all'
// runs both targets (maptear_live.go's init, earlier in file order, has
// registered the experiment).
func init() {
	if e, ok := experiments["maptear"]; ok {
		e.quick = func(ctx context.Context) int {
			return runMaptear(ctx, []string{"--target", "both", "--reads", "2000", "--duration", "1s"})
		}
	}
	modelMaptear = func(ctx context.Context, variant string, o maptear.Options) ([]maptear.CaseResult, error) {
		return modelmaptear.Run(ctx, variant, o)
	}
}
