package procmaps

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// procmapQuery runs PROCMAP_QUERY on fd with q. If name is not empty it is
// the name buffer: its address and length go into q. The buffer is pinned
// for the call, since the kernel writes to an address the Go runtime only
// sees as an integer.
func procmapQuery(fd int, q *ProcmapQuery, name []byte) error {
	var pin runtime.Pinner
	if len(name) > 0 {
		pin.Pin(&name[0])
		q.VMANameAddr = uint64(uintptr(unsafe.Pointer(&name[0])))
		q.VMANameSize = uint32(len(name))
	}
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), PROCMAP_QUERY, uintptr(unsafe.Pointer(q)))
	pin.Unpin()
	if e != 0 {
		return e
	}
	return nil
}
