//go:build !linux

package uprobe

import "context"

// RedZone returns ErrNotSupported off Linux.
func RedZone(ctx context.Context, cfg RedZoneConfig) (RedZoneResult, error) {
	return RedZoneResult{}, errNotLinux
}

// HasOptimizedUprobes returns false off Linux.
func HasOptimizedUprobes() bool { return false }
