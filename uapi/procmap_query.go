package uapi

import "unsafe"

// ProcmapQuery is struct procmap_query of include/uapi/linux/fs.h, the
// argument of the PROCMAP_QUERY ioctl on an open /proc/PID/maps file. Field
// comments give the direction as the uapi header does.
type ProcmapQuery struct {
	Size        uint64 // in: sizeof(struct procmap_query), for versioning
	QueryFlags  uint64 // in: PROCMAP_QUERY_* flags
	QueryAddr   uint64 // in: the address to look up
	VMAStart    uint64 // out: first address of the VMA found
	VMAEnd      uint64 // out: address after its last byte
	VMAFlags    uint64 // out: PROCMAP_QUERY_VMA_* permission bits
	VMAPageSize uint64 // out: the VMA's page size
	VMAOffset   uint64 // out: file offset of VMAStart (pgoff << 12), 0 if anonymous
	Inode       uint64 // out: backing file's inode, 0 if anonymous
	DevMajor    uint32 // out: backing file's device, 0 if anonymous
	DevMinor    uint32 // out
	VMANameSize uint32 // in/out: name buffer capacity; bytes written including the NUL, 0 if no name
	BuildIDSize uint32 // in/out: build ID buffer capacity; bytes written, 0 if none
	VMANameAddr uint64 // in: user address of the name buffer, 0 with VMANameSize 0
	BuildIDAddr uint64 // in: user address of the build ID buffer, 0 with BuildIDSize 0
}

// SizeofProcmapQuery is sizeof(struct procmap_query) on every architecture.
const SizeofProcmapQuery = 104

// Compile-time check that ProcmapQuery has the kernel's layout size: each
// array length is a non-negative constant only if the sizes are equal.
var (
	_ [SizeofProcmapQuery - unsafe.Sizeof(ProcmapQuery{})]struct{}
	_ [unsafe.Sizeof(ProcmapQuery{}) - SizeofProcmapQuery]struct{}
)

// PROCMAP_QUERY is the ioctl request _IOWR('f', 17, struct procmap_query):
// direction read|write (3) << 30, size << 16, type 'f' << 8, number 17.
const PROCMAP_QUERY = 3<<30 | SizeofProcmapQuery<<16 | 'f'<<8 | 17

// enum procmap_query_flags. The four VMA bits filter the query ("the VMA has
// at least these permissions") and come back in VMAFlags.
const (
	PROCMAP_QUERY_VMA_READABLE         = 0x01
	PROCMAP_QUERY_VMA_WRITABLE         = 0x02
	PROCMAP_QUERY_VMA_EXECUTABLE       = 0x04
	PROCMAP_QUERY_VMA_SHARED           = 0x08 // VM_MAYSHARE, the 's' of the maps text
	PROCMAP_QUERY_COVERING_OR_NEXT_VMA = 0x10 // no VMA covers QueryAddr: return the next one
	PROCMAP_QUERY_FILE_BACKED_VMA      = 0x20 // consider file-backed VMAs only
)
