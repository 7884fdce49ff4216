package procfs

import (
	"errors"
	"testing"

	"mmlab/errno"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/uapi"
)

// FuzzQuery hands the model's PROCMAP_QUERY arbitrary arguments, as a
// user's ioctl may: it never panics, fails only with the kernel's errnos,
// and what it finds is a VMA of the mm that covers the address or, with
// COVERING_OR_NEXT_VMA, lies above it.
func FuzzQuery(f *testing.F) {
	f.Add(uint64(uapi.SizeofProcmapQuery), uint64(0), uint64(0x100000000000), uint32(0), uint32(0), uint64(0), uint64(0), uint16(64), uint16(0), false)
	f.Add(uint64(24), uint64(uapi.PROCMAP_QUERY_COVERING_OR_NEXT_VMA), uint64(0), uint32(5), uint32(20), uint64(1), uint64(1), uint16(4), uint16(20), true)
	f.Add(uint64(4097), uint64(0xff), uint64(1<<63), uint32(1<<31), uint32(1<<31), uint64(0), uint64(1), uint16(0), uint16(0), true)
	m := mm.New(new(mm.Namespace), machine.MustNamed("x86-64").Features)
	in := mm.NewInode(new(mm.Namespace), "/lib/a.so", 1<<20, nil)
	in.BuildID = []byte{1, 2, 3, 4}
	file := mm.Open(in)
	for i, a := range []uint64{0x100000000000, 0x100000004000, 0x7f0000000000} {
		var fl *mm.File
		if i == 1 {
			fl = file
		}
		flags := mm.MAP_PRIVATE | mm.MAP_FIXED
		if fl == nil {
			flags |= mm.MAP_ANONYMOUS
		}
		if _, err := m.Mmap(nil, a, 8192, mm.PROT_READ|mm.PROT_EXEC, flags, fl, 0); err != nil {
			f.Fatal(err)
		}
	}
	allowed := []error{errno.E2BIG, errno.EINVAL, errno.ENOENT, errno.ENAMETOOLONG, errno.EFAULT}
	f.Fuzz(func(t *testing.T, size, flags, addr uint64, nameSize, idSize uint32, nameAddr, idAddr uint64, nameBuf, idBuf uint16, after bool) {
		v := Before
		if after {
			v = After
		}
		q := uapi.ProcmapQuery{Size: size, QueryFlags: flags, QueryAddr: addr, VMANameSize: nameSize, BuildIDSize: idSize,
			VMANameAddr: nameAddr, BuildIDAddr: idAddr}
		err := mustOpenMaps(m, Options{Variant: v}).Query(&q, make([]byte, nameBuf), make([]byte, idBuf))
		if err != nil {
			for _, a := range allowed {
				if errors.Is(err, a) {
					return
				}
			}
			t.Fatalf("Query(%+v): %v is not one of the kernel's errnos", q, err)
		}
		if size < 40 {
			return // the VMA's fields were not copied out
		}
		vma := m.FindVMA(q.VMAStart)
		if vma == nil || vma.Start != q.VMAStart || vma.End != q.VMAEnd {
			t.Fatalf("Query(%#x) found [%#x, %#x), not a VMA of the mm", addr, q.VMAStart, q.VMAEnd)
		}
		if q.VMAEnd <= addr {
			t.Fatalf("Query(%#x) found [%#x, %#x), below the address", addr, q.VMAStart, q.VMAEnd)
		}
		if flags&uapi.PROCMAP_QUERY_COVERING_OR_NEXT_VMA == 0 && q.VMAStart > addr {
			t.Fatalf("Query(%#x) without COVERING_OR_NEXT_VMA found [%#x, %#x) above it", addr, q.VMAStart, q.VMAEnd)
		}
	})
}
