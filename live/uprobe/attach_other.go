//go:build !linux

package uprobe

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"mmlab/live"
)

var errNotLinux = fmt.Errorf("live uprobes: %w", live.Unsupported("needs Linux, not %s", runtime.GOOS))

// Probes are uprobes attached by Attach; there are none off Linux.
type Probes struct{}

// Attach returns ErrNotSupported off Linux.
func Attach(ctx context.Context, s Spec) (*Probes, error) { return nil, errNotLinux }

// Spec returns the zero Spec.
func (p *Probes) Spec() Spec { return Spec{} }

// LinkTime returns 0.
func (p *Probes) LinkTime() time.Duration { return 0 }

// Hits returns ErrNotSupported.
func (p *Probes) Hits() (uint64, error) { return 0, errNotLinux }

// Close does nothing.
func (p *Probes) Close() error { return nil }

// Supported returns ErrNotSupported off Linux.
func Supported() error { return errNotLinux }

// Targets returns ErrNotSupported off Linux.
func Targets() (map[string]Target, error) { return nil, errNotLinux }

// LookupTarget returns ErrNotSupported off Linux.
func LookupTarget(name string) (Target, error) { return Target{}, errNotLinux }

// SledOffsets returns ErrNotSupported off Linux.
func SledOffsets(n int) (string, []uint64, error) { return "", nil, errNotLinux }

// FirstHit returns ErrNotSupported off Linux.
func FirstHit(ctx context.Context, m string, later int) (FirstHitResult, error) {
	return FirstHitResult{}, errNotLinux
}
