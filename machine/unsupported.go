package machine

import "errors"

// ErrNotSupported is the one sentinel of everything that cannot run on this
// machine: not Linux, not root, a kernel too old or without a feature, a tool
// missing. Every such error, from any package, satisfies
// errors.Is(err, ErrNotSupported), as cilium/ebpf's ErrNotSupported does.
var ErrNotSupported = errors.New("not supported here")

// UnsupportedError names what this machine lacks: the feature or tool, with
// how to get it where that can be said, and the first kernel release that
// has it, where one does (cilium/ebpf's UnsupportedFeatureError). It wraps
// ErrNotSupported.
type UnsupportedError struct {
	What string
	// MinKernel is the first release with the feature ("6.11"), "" when
	// no release or tool version applies.
	MinKernel string
}

func (e *UnsupportedError) Error() string {
	s := ErrNotSupported.Error() + ": " + e.What
	if e.MinKernel != "" {
		s += " (Linux " + e.MinKernel + "+)"
	}
	return s
}

// Unwrap returns ErrNotSupported.
func (e *UnsupportedError) Unwrap() error { return ErrNotSupported }
