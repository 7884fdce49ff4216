package uapi

// The attach modes of a BPF program on uprobes, named as the kernel names
// the BPF link each makes: the link_type line of the link's
// /proc/PID/fdinfo (bpf_link_show_fdinfo prints the BPF_LINK_TYPE names of
// include/linux/bpf_types.h).
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
