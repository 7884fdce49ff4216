package procfs

import (
	"errors"
	"runtime"
	"testing"
	"unsafe"

	"mmlab/machine"
	"mmlab/uapi"

	"golang.org/x/sys/unix"

	"mmlab/errno"
	"mmlab/mm"
)

// liveQuery runs PROCMAP_QUERY on fd (this process's maps) with a name
// buffer of nameSize bytes (none if 0).
func liveQuery(fd int, addr, flags uint64, nameSize int) (uapi.ProcmapQuery, string, error) {
	q := uapi.ProcmapQuery{Size: uapi.SizeofProcmapQuery, QueryFlags: flags, QueryAddr: addr}
	var name []byte
	var pin runtime.Pinner
	defer pin.Unpin()
	if nameSize > 0 {
		name = make([]byte, nameSize)
		pin.Pin(&name[0])
		q.VMANameSize, q.VMANameAddr = uint32(nameSize), uint64(uintptr(unsafe.Pointer(&name[0])))
	}
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uapi.PROCMAP_QUERY, uintptr(unsafe.Pointer(&q)))
	if e != 0 {
		return q, "", e
	}
	nm := ""
	if q.VMANameSize > 0 {
		nm = string(name[:q.VMANameSize-1])
	}
	return q, nm, nil
}

// The model's PROCMAP_QUERY answers as the live kernel does for the same
// layout, mapped for real in this process at the same addresses: the VMA
// found, its permissions, offset and name, and the errno.
func TestQueryMatchesLiveKernel(t *testing.T) {
	const a = 0x6f0000000000
	path, fd := openTempFile(t, 16*4096, unix.O_RDONLY)
	type region struct {
		off, pages   uint64
		prot, flags  int
		file         bool
		fileOffPages uint64
	}
	layout := []region{
		{0, 2, unix.PROT_READ | unix.PROT_WRITE, unix.MAP_PRIVATE | unix.MAP_ANONYMOUS, false, 0},
		{4, 2, unix.PROT_READ, unix.MAP_PRIVATE, true, 2},
		{8, 1, unix.PROT_READ | unix.PROT_WRITE, unix.MAP_SHARED | unix.MAP_ANONYMOUS, false, 0},
		{10, 1, unix.PROT_NONE, unix.MAP_PRIVATE | unix.MAP_ANONYMOUS, false, 0},
	}
	m := mm.New(new(mm.Namespace), machine.Host().Features)
	f := mm.Open(mm.NewInode(new(mm.Namespace), path, 16*4096, nil))
	for _, r := range layout {
		addr := uintptr(a + r.off*4096)
		mfd := -1
		var mf *mm.File
		if r.file {
			mfd, mf = fd, f
		}
		got, _, e := unix.Syscall6(unix.SYS_MMAP, addr, uintptr(r.pages*4096), uintptr(r.prot), uintptr(r.flags|unix.MAP_FIXED_NOREPLACE), uintptr(mfd), uintptr(r.fileOffPages*4096))
		if e != 0 || got != addr {
			t.Skipf("cannot map the layout at %#x: %v", addr, e)
		}
		defer unix.Syscall(unix.SYS_MUNMAP, addr, uintptr(r.pages*4096), 0)
		if _, err := m.Mmap(nil, uint64(addr), r.pages*4096, r.prot, r.flags|mm.MAP_FIXED, mf, r.fileOffPages*4096); err != nil {
			t.Fatal(err)
		}
	}
	maps, err := unix.Open("/proc/self/maps", unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(maps)
	if _, _, err := liveQuery(maps, a, 0, 0); err == unix.ENOTTY {
		t.Skip("the kernel has no PROCMAP_QUERY (Linux < 6.11)")
	}
	const R, W, X, S = uapi.PROCMAP_QUERY_VMA_READABLE, uapi.PROCMAP_QUERY_VMA_WRITABLE, uapi.PROCMAP_QUERY_VMA_EXECUTABLE, uapi.PROCMAP_QUERY_VMA_SHARED
	const NEXT, FILE = uapi.PROCMAP_QUERY_COVERING_OR_NEXT_VMA, uapi.PROCMAP_QUERY_FILE_BACKED_VMA
	type qc struct {
		addr, flags uint64
		nameSize    int
	}
	var cases []qc
	for _, off := range []uint64{0, 1, 2, 3, 4, 5, 6, 8, 9, 10} {
		for _, fl := range []uint64{0, NEXT, FILE, FILE | NEXT, W | NEXT, R | X | NEXT, S | NEXT, R, W} {
			cases = append(cases, qc{a + off*4096 + 100, fl, 4096})
		}
	}
	cases = append(cases, qc{a + 4*4096, 0, len(path)}, qc{a + 4*4096, 0, len(path) + 1}, qc{a + 8*4096, 0, 5})
	for _, v := range variants {
		mf := mustOpenMaps(m, Options{Variant: v})
		for _, c := range cases {
			lq, lname, lerr := liveQuery(maps, c.addr, c.flags, c.nameSize)
			mq, mname, merr := query(t, mf, c.addr, c.flags, c.nameSize)
			// Above the layout the kernel finds this process's other
			// VMAs, which the model does not have (it says ENOENT).
			if lerr == nil && lq.VMAStart >= a+11*4096 {
				if merr != nil && !errors.Is(merr, errno.ENOENT) {
					t.Errorf("%s: query %#x flags %#x: model %v, want a VMA or ENOENT", v, c.addr, c.flags, merr)
				}
				continue
			}
			var le unix.Errno
			errors.As(lerr, &le)
			var me errno.Errno
			errors.As(merr, &me)
			if int(le) != int(me) {
				t.Errorf("%s: query %#x flags %#x name %d: model %v, kernel %v", v, c.addr, c.flags, c.nameSize, merr, lerr)
				continue
			}
			if lerr != nil {
				continue
			}
			if lq.VMAStart != mq.VMAStart || lq.VMAEnd != mq.VMAEnd || lq.VMAFlags != mq.VMAFlags ||
				lq.VMAOffset != mq.VMAOffset || lq.VMAPageSize != mq.VMAPageSize || lname != mname || lq.VMANameSize != mq.VMANameSize {
				t.Errorf("%s: query %#x flags %#x:\nmodel  %#x-%#x flags %#x off %#x ps %d name %q (%d)\nkernel %#x-%#x flags %#x off %#x ps %d name %q (%d)",
					v, c.addr, c.flags, mq.VMAStart, mq.VMAEnd, mq.VMAFlags, mq.VMAOffset, mq.VMAPageSize, mname, mq.VMANameSize,
					lq.VMAStart, lq.VMAEnd, lq.VMAFlags, lq.VMAOffset, lq.VMAPageSize, lname, lq.VMANameSize)
			}
		}
	}
}

// The argument errors are the kernel's: a struct over a page (E2BIG), one
// ending before query_addr, an unknown flag, a buffer given by only its size
// or only its address (EINVAL).
func TestQueryArgumentErrorsMatchLiveKernel(t *testing.T) {
	maps, err := unix.Open("/proc/self/maps", unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(maps)
	if _, _, err := liveQuery(maps, 0, uapi.PROCMAP_QUERY_COVERING_OR_NEXT_VMA, 0); err == unix.ENOTTY {
		t.Skip("the kernel has no PROCMAP_QUERY (Linux < 6.11)")
	}
	var buf [16]byte
	var pin runtime.Pinner
	pin.Pin(&buf[0])
	defer pin.Unpin()
	addr := uint64(uintptr(unsafe.Pointer(&buf[0])))
	m := mm.New(new(mm.Namespace), machine.Host().Features)
	if _, err := m.Mmap(nil, 0x10000, 4096, mm.PROT_READ, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED, nil, 0); err != nil {
		t.Fatal(err)
	}
	const next = uapi.PROCMAP_QUERY_COVERING_OR_NEXT_VMA
	for _, q := range []uapi.ProcmapQuery{
		{Size: 4097, QueryFlags: next},
		{Size: 23, QueryFlags: next},
		{Size: 104, QueryFlags: next | 0x40},
		{Size: 104, QueryFlags: next | 1<<40},
		{Size: 104, QueryFlags: next, VMANameSize: 16},
		{Size: 104, QueryFlags: next, VMANameAddr: addr},
		{Size: 104, QueryFlags: next, BuildIDSize: 16},
		{Size: 104, QueryFlags: next, BuildIDAddr: addr},
		{Size: 24, QueryFlags: next}, // valid: the struct up to query_addr
	} {
		lq := q
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(maps), uapi.PROCMAP_QUERY, uintptr(unsafe.Pointer(&lq)))
		for _, v := range variants {
			mq := q
			merr := mustOpenMaps(m, Options{Variant: v}).Query(&mq, buf[:], buf[:])
			var me errno.Errno
			errors.As(merr, &me)
			if int(me) != int(e) {
				t.Errorf("%s: %+v: model %v, kernel %v", v, q, merr, e)
			}
		}
	}
}
