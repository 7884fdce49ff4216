package uprobe

import (
	"context"
	"os"
	"runtime"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"mmlab/machine"
	"mmlab/uapi"
)

// strayOutcome is how a child ended up after running an int3 of its own
// (not a uprobe's): killed by SIGTRAP, or found stopped at the int3 again
// with no signal, the breakpoint restarted.
type strayOutcome string

const (
	straySIGTRAP  strayOutcome = "SIGTRAP"
	strayRestarts strayOutcome = "restarted at the int3, no signal"
)

// runStrayInt3 forks a child that calls the code at pc (an int3 and a ret)
// with SIGTRAP at its default action, and follows it with ptrace until it
// takes the SIGTRAP or is found stopped at pc: PTRACE_INTERRUPT stops it
// wherever it is, and a stop at pc, where the breakpoint is, means the
// kernel put it back there without a signal (a child still on its way to
// the call is resumed and stopped again). The child is killed and reaped
// before it returns.
func runStrayInt3(t *testing.T, pc uintptr) strayOutcome {
	t.Helper()
	runtime.LockOSThread() // ptrace requests come from the tracing thread
	defer runtime.UnlockOSThread()
	pid, e := rawForkRun(pc)
	if e != 0 {
		t.Fatal(e)
	}
	defer func() {
		_ = unix.Kill(pid, unix.SIGKILL)
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, unix.WALL, nil)
	}()
	seized := unix.PtraceSeize(pid) == nil // fails if it died already
	for {
		if seized {
			if err := unix.PtraceInterrupt(pid); err != nil {
				t.Fatalf("PTRACE_INTERRUPT: %v", err)
			}
		}
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, unix.WALL, nil); err != nil {
			t.Fatal(err)
		}
		switch {
		case ws.Signaled() && ws.Signal() == syscall.SIGTRAP:
			return straySIGTRAP
		case !ws.Stopped():
			t.Fatalf("child: %v, before any SIGTRAP or stop at the int3", ws)
		case ws.StopSignal() == syscall.SIGTRAP && ws.TrapCause() == 0:
			return straySIGTRAP // its signal-delivery stop
		case ws.TrapCause() != unix.PTRACE_EVENT_STOP:
			t.Fatalf("child stopped: %v", ws)
		}
		var regs unix.PtraceRegs
		if err := unix.PtraceGetRegs(pid, &regs); err != nil {
			t.Fatal(err)
		}
		if uintptr(regs.Rip) == pc {
			return strayRestarts
		}
		if err := unix.PtraceCont(pid, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// The live counterpart of uprobes.TestStrayBreakpointExecOnly: a
// program's own int3 in execute-only text delivers SIGTRAP until a uprobe
// is installed in its mm (MMF_HAS_UPROBES), and from then on, on a machine
// with protection keys, handle_swbp() finds no uprobe there and reads the
// text to see whether the int3 is the program's (is_trap_at_addr()); the
// read fails on the execute-only key, so it restarts the int3, for ever,
// and the task never gets its SIGTRAP. Without keys the text reads like
// r-x and the SIGTRAP comes. Read-execute text delivers SIGTRAP either
// way. The model predicts each of these for its machine's features. It
// runs in a fresh process, whose mm no earlier test gave uprobes.
func TestLiveStrayBreakpointExecOnly(t *testing.T) {
	needLive(t)
	if !inFreshProcess(t) {
		return
	}
	pku := machine.Host().Features.OSPKE
	page := func(prot int) uintptr {
		b, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unix.Munmap(b) })
		copy(b, []byte{0xcc, 0xc3}) // int3; ret
		if err := unix.Mprotect(b, prot); err != nil {
			t.Fatal(err)
		}
		return uintptr(unsafe.Pointer(&b[0]))
	}
	xonly, rx := page(unix.PROT_EXEC), page(unix.PROT_READ|unix.PROT_EXEC)
	if got := runStrayInt3(t, xonly); got != straySIGTRAP {
		t.Fatalf("--x text, no uprobe in the mm: %s, want %s", got, straySIGTRAP)
	}

	nop := target(t, "nop")
	p, err := Attach(context.Background(), Spec{Path: nop.Path, Offsets: []uint64{nop.Offset}, Mode: uapi.AttachMulti, Pid: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want := straySIGTRAP
	if pku {
		want = strayRestarts
	}
	t.Logf("protection keys (ospke): %v; a uprobe installed in this mm, inherited by the children", pku)
	if got := runStrayInt3(t, xonly); got != want {
		t.Errorf("--x text, a uprobe in the mm: %s, want %s", got, want)
	}
	if got := runStrayInt3(t, rx); got != straySIGTRAP {
		t.Errorf("r-x text, a uprobe in the mm: %s, want %s", got, straySIGTRAP)
	}
}
