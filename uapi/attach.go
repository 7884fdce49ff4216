package uapi

// The attach modes of a BPF program on uprobes, named as the kernel names
// the BPF link each makes: the BPF_LINK_TYPE names of
// include/linux/bpf_types.h, which the link_type line of the link's
// /proc/PID/fdinfo shows (kernel/bpf/syscall.c:bpf_link_show_fdinfo; it
// says uretprobe_multi for a uprobe_multi link of uretprobes, flag
// BPF_F_UPROBE_MULTI_RETURN).
const (
	// AttachMulti is one BPF_LINK_TYPE_UPROBE_MULTI link (attach type
	// BPF_TRACE_UPROBE_MULTI, Linux 6.6+) of every probe offset: one
	// register per offset, and on detach one unregister per offset and
	// one uprobe_unregister_sync.
	AttachMulti = "uprobe_multi"
	// AttachPerf is one perf event of the uprobe PMU
	// (/sys/bus/event_source/devices/uprobe) per probe offset, the program
	// linked to each (BPF_LINK_TYPE_PERF_EVENT): each detach is an
	// unregister and a uprobe_unregister_sync.
	AttachPerf = "perf"
)
