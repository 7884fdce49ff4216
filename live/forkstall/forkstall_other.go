//go:build !linux

package forkstall

import (
	"context"

	"mmlab/experiment"
	"mmlab/experiment/forkstall"
	"mmlab/live"
)

// Run needs Linux.
func Run(ctx context.Context, o *forkstall.Options, env experiment.Env, emit func(forkstall.Result)) error {
	return live.Unsupported("the live forkstall experiment needs Linux")
}
