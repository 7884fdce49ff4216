// Package uapi holds what the kernel's user-space ABI defines and both the
// model and the live side speak: struct procmap_query and its flags
// (include/uapi/linux/fs.h), the /proc/PID/maps line format that
// fs/proc/task_mmu.c:show_map_vma prints, with its parser and formatter,
// the x86-64 uprobe system call numbers, the BPF link types a uprobe
// program is attached by, and the name of the mmap_lock that tracing
// shows. It is portable and has no Linux-only code.
package uapi
