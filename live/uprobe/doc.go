// Package uprobe attaches uprobes to the running Linux kernel and measures
// them: BPF programs that count hits, attached through one uprobe_multi link
// or through one perf-event uprobe per probe site (github.com/cilium/ebpf,
// no clang), probe targets written in Go assembly inside this binary, the
// kernel's `bench trig-*` producer loop, the red-zone check
// (cpu.RedZoneTarget), and the cost of attach and detach.
//
// The live sides of the trigger, attach, forkstall and redzone experiments
// use it. Everything is Linux-only and needs root; elsewhere the functions return
// an error wrapping live.ErrNotSupported.
package uprobe

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Spec says what to attach.
type Spec struct {
	// Path is the executable or library file to probe.
	Path string
	// Offsets are file offsets of the probed instructions, at least one.
	Offsets []uint64
	// Mode is how: uapi.AttachMulti or uapi.AttachPerf.
	Mode string
	// Ret makes every probe a uretprobe (the program runs on return).
	Ret bool
	// Pid limits the probes to one process (uapi.AttachMulti: its thread
	// group; uapi.AttachPerf: perf_event_open's pid, which is one thread);
	// 0 means every process.
	Pid int
}

// withErrno wraps err as "what: ENAME: err" when a Linux errno is behind it,
// so users see the kernel's name for the failure.
func withErrno(what string, err error) error {
	var e syscall.Errno
	if errors.As(err, &e) {
		if name := unix.ErrnoName(e); name != "" {
			return fmt.Errorf("%s: %s: %w", what, name, err)
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}
