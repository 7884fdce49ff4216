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

// SigCode is a siginfo si_code of a memory fault (include/uapi/asm-generic/siginfo.h).
type SigCode int

// The si_codes of the model's faults.
const (
	SEGV_MAPERR SigCode = 1 // no VMA at the address
	SEGV_ACCERR SigCode = 2 // the VMA's protection forbids the access
	SEGV_PKUERR SigCode = 4 // the thread's PKRU forbids the access to the VMA's protection key
	BUS_ADRERR  SigCode = 2 // a file page past EOF
)

// Name returns the si_code's name for sig ("SEGV_PKUERR"), as the kernel's
// headers spell it, or "code N".
func (c SigCode) Name(sig Signal) string {
	switch {
	case sig == SIGSEGV && c == SEGV_MAPERR:
		return "SEGV_MAPERR"
	case sig == SIGSEGV && c == SEGV_ACCERR:
		return "SEGV_ACCERR"
	case sig == SIGSEGV && c == SEGV_PKUERR:
		return "SEGV_PKUERR"
	case sig == SIGBUS && c == BUS_ADRERR:
		return "BUS_ADRERR"
	}
	return "code " + strconv.Itoa(int(c))
}

// SigInfo is a fault's signal with the siginfo the kernel fills for it
// (force_sig_fault, force_sig_pkuerr): si_code and, for SEGV_PKUERR, si_pkey.
// It is an error; errors.Is matches its Signal and errors.As finds the
// Signal in it, so a caller that only wants the signal need not know it.
type SigInfo struct {
	Signo Signal
	Code  SigCode
	Pkey  int // si_pkey, with SEGV_PKUERR
}

// Fault returns the SigInfo of sig with code.
func Fault(sig Signal, code SigCode) SigInfo { return SigInfo{Signo: sig, Code: code} }

// Error returns the signal and its code: "SIGSEGV SEGV_ACCERR", as the
// trace language prints a fault.
func (s SigInfo) Error() string { return s.Signo.String() + " " + s.Code.Name(s.Signo) }

// Is reports whether target is s's Signal.
func (s SigInfo) Is(target error) bool { t, ok := target.(Signal); return ok && t == s.Signo }

// As sets a *Signal target to s's Signal.
func (s SigInfo) As(target any) bool {
	if p, ok := target.(*Signal); ok {
		*p = s.Signo
		return true
	}
	return false
}
