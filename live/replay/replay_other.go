//go:build !linux

package replay

import (
	"context"
	"io"

	"mmlab/trace"
)

// Run would run p on the live kernel; it needs Linux.
func Run(ctx context.Context, p *trace.Program, stdout io.Writer) error {
	return ErrNotSupported
}
