//go:build !linux

package calibrate

import (
	"context"
	"runtime"

	"mmlab/live"
	"mmlab/machine"
)

// Run measures this host; on this system it cannot.
func Run(context.Context, Options) (machine.Calibration, error) {
	return machine.Calibration{}, live.Unsupported("mmlab calibrate measures Linux's primitives; this is %s", runtime.GOOS)
}
