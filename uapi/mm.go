package uapi

// MmapLockName is the name of an mm's address-space lock as the kernel
// spells it: struct mm_struct's mmap_lock (include/linux/mm_types.h) and
// the trace system of its tracepoints (include/trace/events/mmap_lock.h,
// /sys/kernel/tracing/events/mmap_lock/). The model's lock and the live
// traces' waits are filed under it.
const MmapLockName = "mmap_lock"
