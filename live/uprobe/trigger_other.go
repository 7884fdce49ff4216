//go:build !linux

package uprobe

import "context"

// Trigger returns ErrNotSupported off Linux.
func Trigger(ctx context.Context, cfg TriggerConfig) (TriggerResult, error) {
	return TriggerResult{}, errNotLinux
}
