package uapi

// The x86-64 system calls of uprobes (arch/x86/entry/syscalls/syscall_64.tbl):
// user code never calls them itself; the kernel's trampolines do.
const (
	// NrUretprobe is __NR_uretprobe, sys_uretprobe: the uretprobe
	// trampoline in the XOL page calls it on a probed function's return
	// (Linux 6.11+).
	NrUretprobe = 335
	// NrUprobe is __NR_uprobe, sys_uprobe: the [uprobes-trampoline] that an
	// optimized uprobe's 5-byte call jumps to calls it (Linux 6.18+).
	NrUprobe = 336
)
