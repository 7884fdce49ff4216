//go:build !linux

package host

import (
	"fmt"
	"runtime"
	"syscall"
	"time"

	"mmlab/machine"
)

// errNotLinux is what every call that would change or read a thread's
// scheduling returns off Linux.
var errNotLinux = &machine.UnsupportedError{What: fmt.Sprintf("host thread scheduling needs Linux, not %s", runtime.GOOS)}

// CPUs returns an error off Linux: threads are not pinned.
func CPUs() ([]int, error) { return nil, errNotLinux }

// Pin returns an error off Linux.
func Pin(...int) error { return errNotLinux }

// SetFIFO returns an error off Linux.
func SetFIFO(int) error { return errNotLinux }

// SetNice returns an error off Linux.
func SetNice(int) error { return errNotLinux }

// SetTimerSlack returns an error off Linux.
func SetTimerSlack(time.Duration) error { return errNotLinux }

// SignalThread returns an error off Linux.
func SignalThread(syscall.Signal) error { return errNotLinux }

// Nanosleep is time.Sleep off Linux.
func Nanosleep(d time.Duration) { time.Sleep(d) }

// ThreadCPUTime is not available off Linux: callers fall back to wall time.
func ThreadCPUTime() (time.Duration, bool) { return 0, false }

// RunDelay is not available off Linux: OpenRunDelay returns an error, and
// a nil clock reads nothing.
type RunDelay struct{}

// OpenRunDelay returns an error off Linux.
func OpenRunDelay() (*RunDelay, error) { return nil, errNotLinux }

// Read returns false: there is no clock.
func (*RunDelay) Read() (time.Duration, bool) { return 0, false }

// Close does nothing.
func (*RunDelay) Close() error { return nil }

// Steal returns an error off Linux: there is no /proc/stat.
func Steal() (map[int]time.Duration, error) { return nil, errNotLinux }
