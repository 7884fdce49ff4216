//go:build !linux

package host

import (
	"errors"
	"testing"

	"mmlab/machine"
)

// Off Linux every call that would read or change a thread's scheduling
// says it is not supported, and the clocks read nothing.
func TestNotSupported(t *testing.T) {
	_, cpusErr := CPUs()
	_, rdErr := OpenRunDelay()
	_, stealErr := Steal()
	for _, err := range []error{cpusErr, Pin(0), SetFIFO(1), SetNice(0), rdErr, stealErr} {
		if !errors.Is(err, machine.ErrNotSupported) {
			t.Errorf("%v, want ErrNotSupported", err)
		}
	}
	if _, ok := ThreadCPUTime(); ok {
		t.Error("ThreadCPUTime reads off Linux")
	}
}
