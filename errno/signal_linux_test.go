package errno

import (
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSignalsMatchUnix pins the signal numbers and names to x/sys/unix: the
// name unix gives each number is the model's.
func TestSignalsMatchUnix(t *testing.T) {
	for _, s := range []Signal{SIGILL, SIGTRAP, SIGBUS, SIGKILL, SIGSEGV} {
		if want := unix.SignalName(syscall.Signal(s)); s.String() != want {
			t.Errorf("Signal(%d).String() = %q, want %q", int(s), s.String(), want)
		}
	}
	if s := Signal(10).String(); s != "signal 10" {
		t.Errorf("Signal(10).String() = %q", s)
	}
}
