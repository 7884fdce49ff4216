// Package mm models a Linux address space (mm/, kernel/fork.c): an MM
// (mm_struct) holding VMAs (vm_area_struct) in an RCU-readable range tree,
// x86-64 page tables, anonymous and file-backed pages, files with a page cache
// and an i_mmap, anon_vma tracking as far as merging and copy-on-write need
// it, and the operations mmap, munmap, mprotect, mremap, page faults, fork
// (dup_mmap) and exit (exit_mmap), with the kernel's split and merge rules as
// /proc/PID/maps shows them on the live kernel (6.18).
//
// Operations return the kernel's errno values (package mmlab/errno); user
// accesses that the kernel would answer with a signal return Signal
// (SIGSEGV, SIGBUS).
//
// # Lock order
//
// Mirrors the header comment of mm/rmap.c, restricted to what the model has:
//
//	dup_mmap_sem (uprobes, outside this package)
//	  MM.MmapLock ("mmap_lock"; a child's lock nests inside its parent's in Fork)
//	    per-VMA write lock (vma_start_write; issue 4 adds it, the fields are here)
//	      Inode.IMmapRwsem ("i_mmap_rwsem")
//	        MM.ptLock (page_table_lock: anon_vma_prepare under the read lock)
//	          pgtable split PTE locks (inside mm/pgtable)
//
// Writers of the VMA tree and of VMA fields hold MmapLock for write. Faults
// and user accesses hold it for read. Lock-free readers of the tree (RCU
// walkers, issue 4) see one immutable snapshot of mm/mt but must validate the
// VMA they find, as the kernel's do.
package mm
