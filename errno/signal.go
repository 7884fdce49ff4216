package errno

import "strconv"

// Signal is a Linux (x86-64) signal number. It implements error, so a
// memory access can fail with the signal the kernel would raise for it
// (SIGSEGV, SIGBUS), and the CPU, the address space and the tasks of the
// model all speak of the same value.
type Signal int

// The signals the model raises, with their Linux numbers.
const (
	SIGILL  Signal = 4  // #UD: an instruction outside the model's subset, a bad uretprobe return
	SIGTRAP Signal = 5  // breakpoint (a uprobe hit with no handler left)
	SIGBUS  Signal = 7  // access to a file page past EOF
	SIGKILL Signal = 9  // fatal; takes the whole thread group down
	SIGSEGV Signal = 11 // access outside a VMA or against its protection
)

var signalNames = [...]string{
	SIGILL:  "SIGILL",
	SIGTRAP: "SIGTRAP",
	SIGBUS:  "SIGBUS",
	SIGKILL: "SIGKILL",
	SIGSEGV: "SIGSEGV",
}

// String returns the signal's name ("SIGKILL"), as unix.SignalName does,
// or "signal N" for one the model does not raise.
func (s Signal) String() string {
	if s > 0 && int(s) < len(signalNames) && signalNames[s] != "" {
		return signalNames[s]
	}
	return "signal " + strconv.Itoa(int(s))
}

func (s Signal) Error() string { return s.String() }
