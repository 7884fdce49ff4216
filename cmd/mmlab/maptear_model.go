package main

import (
	"context"

	"mmlab/live/maptear"
	modelmaptear "mmlab/procfs/maptear"
)

// The model target of 'mmlab run maptear': the tearing check on the model's
// before and after maps walks.
func init() {
	modelMaptear = func(ctx context.Context, variant string, o maptear.Options) ([]maptear.CaseResult, error) {
		return modelmaptear.Run(ctx, variant, o)
	}
}
