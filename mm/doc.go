// Package mm models a Linux address space (mm/, kernel/fork.c): an MM
// (mm_struct) holding VMAs (vm_area_struct) in an RCU-readable range tree,
// x86-64 page tables, anonymous and file-backed pages, files with a page cache
// and an i_mmap, anon_vma tracking as far as merging and copy-on-write need
// it, and the operations mmap, munmap, mprotect, mremap, page faults, fork
// (dup_mmap) and exit (exit_mmap), with the kernel's split and merge rules as
// /proc/PID/maps shows them on the live kernel (6.18).
//
// Operations return the kernel's errno values (package mmlab/errno); user
// accesses that the kernel would answer with a signal return that signal, an
// errno.Signal (SIGSEGV, SIGBUS).
//
// # Lock order
//
// Mirrors the header comment of mm/rmap.c, restricted to what the model has.
// Each line starts with a lock class of package mmlab/locking/lockrank,
// whose Order this tree must agree with (lockrank's tests check it, and
// runs built with -tags invariants check each acquisition):
//
//	dup_mmap_sem               uprobes' DupMmapSem (outside this package)
//	  mmap_lock                MM.MmapLock; a fork child's nests inside its parent's (MmapWriteLockNested)
//	    vma_lock               the per-VMA lock (vma_start_write / vma_start_read, vma_lock.go)
//	      i_mmap_rwsem         Inode.IMmapRwsem
//	        page_table_lock    MM.ptLock (anon_vma_prepare under the read lock)
//	          anon_vma         AnonVMA root mu (anon_vma->root->rwsem: counters of a tree of forked mms)
//	            ptl            pgtable's split PTE locks (inside mm/pgtable)
//
// Writers of the VMA tree and of VMA fields hold MmapLock for write. Faults
// and user accesses hold it for read (or a VMA read lock). Lock-free readers
// of the tree (RCU walkers) see one immutable snapshot of mm/mt but must
// validate the VMA they find, as the kernel's do.
//
// What the live kernel showed and the model pins (testdata/traces, each
// recorded live): a COW write fault past EOF leaves an anon_vma behind
// (do_cow_fault prepares it first); a read fault on private anonymous memory
// maps the zero page and creates no anon_vma, so mremap still resets such a
// VMA's pgoff; an inherited faulted VMA in a fork child does not merge with
// new neighbours (vma_is_fork_child, as in v6.19); mprotect of a never-written
// anonymous VMA to read-only drops VM_ACCOUNT; mremap with old length 0
// duplicates a shared mapping.
package mm
