//go:build !linux

package procmaps

import "mmlab/uapi"

// Reader reads the VMAs of a process. Only Linux has them.
type Reader struct{}

// Open returns ErrNotSupported outside Linux.
func Open(pid int) (*Reader, error) { return nil, ErrNotSupported }

// Pid returns 0 outside Linux.
func (r *Reader) Pid() int { return 0 }

// Walk returns ErrNotSupported outside Linux.
func (r *Reader) Walk(fn func(*uapi.VMA) bool) error { return ErrNotSupported }

// WalkQuery returns ErrNotSupported outside Linux.
func (r *Reader) WalkQuery(fn func(*uapi.VMA) bool) error { return ErrNotSupported }

// Lookup returns ErrNotSupported outside Linux.
func (r *Reader) Lookup(addr uint64) (*uapi.VMA, error) { return nil, ErrNotSupported }

// LookupText returns ErrNotSupported outside Linux.
func (r *Reader) LookupText(addr uint64) (*uapi.VMA, error) { return nil, ErrNotSupported }

// BuildID returns ErrNotSupported outside Linux.
func (r *Reader) BuildID(addr uint64) ([]byte, error) { return nil, ErrNotSupported }

// RawQuery returns ErrNotSupported outside Linux.
func (r *Reader) RawQuery(q *uapi.ProcmapQuery) error { return ErrNotSupported }

// Close does nothing outside Linux.
func (r *Reader) Close() error { return nil }

// KernelThread reports false outside Linux.
func (r *Reader) KernelThread() bool { return false }
