package errno

import (
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestTableMatchesUnix pins the table to x/sys/unix on Linux.
func TestTableMatchesUnix(t *testing.T) {
	for i := 1; i < 134; i++ {
		if want := unix.ErrnoName(syscall.Errno(i)); want != "" && Errno(i).Name() != want {
			t.Errorf("Errno(%d).Name() = %q, want %q", i, Errno(i).Name(), want)
		}
	}
	if EEXIST.Name() != "EEXIST" || int(EEXIST) != int(unix.EEXIST) || int(E2BIG) != int(unix.E2BIG) || int(EOPNOTSUPP) != int(unix.EOPNOTSUPP) {
		t.Error("constants differ from unix")
	}
}
