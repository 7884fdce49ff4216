// Package replay runs an mmlab trace (package trace) on the live kernel: in a
// fresh process, with real system calls, a real fork() whose child goes on
// with the trace, and real user-mode loads and stores whose SIGSEGV or SIGBUS
// is caught and reported. It is the oracle the model must match.
//
// The Go runtime cannot run ordinary Go code in a forked child, so the ops
// run in a small C helper (csrc/helper.c, embedded) that Run compiles once with the
// system C compiler into the user's cache directory. Go validates the trace,
// creates its files in a fresh temporary directory, hands the helper a
// decoded op table on stdin, and turns the helper's errno numbers into names.
// The helper runs in its own process group with PR_SET_PDEATHSIG; on
// cancellation Run kills the group and reaps every process of it, and it
// always removes the temporary directory.
//
// It works on Linux only; elsewhere Run returns ErrNotSupported.
package replay

import "mmlab/live"

// ErrNotSupported is what Run returns on systems other than Linux; it wraps
// live.ErrNotSupported.
var ErrNotSupported = live.Unsupported("live replay needs Linux")
