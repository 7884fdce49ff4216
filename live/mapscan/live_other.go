//go:build !linux

package mapscan

import (
	"context"
	"errors"

	"mmlab/experiment/mapscan"
)

// Run needs Linux processes and /proc: on other systems it says so.
func Run(ctx context.Context, o mapscan.Options) (mapscan.Stats, error) {
	return mapscan.Stats{}, errors.New("mapscan: the live run needs Linux (/proc/PID/maps, sched_setaffinity): not supported on this system")
}
