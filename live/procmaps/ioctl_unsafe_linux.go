package procmaps

import (
	"unsafe"

	"mmlab/uapi"

	"golang.org/x/sys/unix"
)

// procmapQuery runs PROCMAP_QUERY on fd with q. If name is not empty it is
// the name buffer: its address and length go into q. The caller must have
// pinned it (runtime.Pinner), since the kernel writes to an address that
// the Go runtime only sees as an integer.
func procmapQuery(fd int, q *uapi.ProcmapQuery, name []byte) error {
	if len(name) > 0 {
		q.VMANameAddr = bufAddr(name)
		q.VMANameSize = uint32(len(name))
	}
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uapi.PROCMAP_QUERY, uintptr(unsafe.Pointer(q)))
	if e != 0 {
		return e
	}
	return nil
}

// bufAddr is the user address of b's first byte, for a buffer field of
// struct procmap_query. The caller pins b while the kernel may write it.
func bufAddr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&b[0]))) }
