//go:build !linux

package sched

import "errors"

// hostCPUs returns nil: model CPUs are not pinned outside Linux.
func hostCPUs() []int { return nil }

// pin is not called outside Linux.
func pin(int) error { return nil }

// setHostPriority is not supported outside Linux.
func setHostPriority(int) error { return errors.ErrUnsupported }
