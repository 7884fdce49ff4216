package procfs

import (
	"errors"

	"mmlab/errno"
	"mmlab/mm"
	"mmlab/mm/pgtable"
	"mmlab/sched"
	"mmlab/uapi"
)

// procmapQueryValidFlags is PROCMAP_QUERY_VALID_FLAGS_MASK.
const procmapQueryValidFlags = uapi.PROCMAP_QUERY_VMA_READABLE | uapi.PROCMAP_QUERY_VMA_WRITABLE |
	uapi.PROCMAP_QUERY_VMA_EXECUTABLE | uapi.PROCMAP_QUERY_VMA_SHARED |
	uapi.PROCMAP_QUERY_COVERING_OR_NEXT_VMA | uapi.PROCMAP_QUERY_FILE_BACKED_VMA

// procmapQueryVMAFlags is PROCMAP_QUERY_VMA_FLAGS, the permission filter bits.
const procmapQueryVMAFlags = 0x0f

// offsetofEndQueryAddr is offsetofend(struct procmap_query, query_addr).
const offsetofEndQueryAddr = 24

// pathMax is PATH_MAX.
const pathMax = 4096

// vmaName is get_vma_name() for the model: the file's path or the special
// mapping's name, "" for none.
func vmaName(v *mm.VMA) string {
	if v.File != nil {
		return v.File.Inode.Name
	}
	return v.Name
}

// Query mirrors fs/proc/task_mmu.c:do_procmap_query(), the PROCMAP_QUERY
// ioctl on the open file: q is the caller's struct procmap_query (q.Size
// as the caller set it), name and buildID stand for the user buffers at
// q.VMANameAddr and q.BuildIDAddr (which need only be non-zero). On success
// the first min(q.Size, 104) bytes of q are updated, as copy_to_user does.
//
// Errors as the kernel's: E2BIG for a size over a page, EINVAL for a size
// short of query_addr, an unknown flag, or a buffer given by only its size
// or its address; ENOENT for no matching VMA; ENAMETOOLONG when the name or
// the build ID does not fit; EFAULT when a buffer is shorter than its size;
// ESRCH after the mm exited; EINTR from a killable lock.
//
// The VMA is found and read under the mmap read lock (Before) or its VMA
// read lock (After, query_vma_find_by_addr with lock_next_vma); the lock is
// dropped before the build ID is looked up and the results copied out.
func (f *MapsFile) Query(q *uapi.ProcmapQuery, name, buildID []byte) error {
	usize := q.Size
	if usize > pgtable.PageSize {
		return errno.E2BIG
	}
	if usize < offsetofEndQueryAddr {
		return errno.EINVAL
	}
	karg := *q // copy_struct_from_user: fields past usize read as zero
	clearFrom(&karg, usize)
	if karg.QueryFlags&^procmapQueryValidFlags != 0 {
		return errno.EINVAL
	}
	if (karg.VMANameSize != 0) != (karg.VMANameAddr != 0) || (karg.BuildIDSize != 0) != (karg.BuildIDAddr != 0) {
		return errno.EINVAL
	}
	if f.m.Users.Load() == 0 {
		return errno.ESRCH // mmget_not_zero failed
	}

	defer f.userReturn()
	lc := queryLock{f: f}
	if f.opt.Variant == Before {
		if err := f.m.MmapReadLockKillable(f.opt.Waiter); err != nil {
			return err
		}
		lc.mmapLocked = true
	}
	v, err := lc.confirmedMatching(karg.QueryAddr, karg.QueryFlags)
	if err != nil {
		lc.teardown()
		return err
	}
	sched.Charge(f.opt.VMACost)
	karg.VMAStart, karg.VMAEnd = v.Start, v.End
	karg.VMAFlags = 0
	for _, b := range [...]struct {
		vm  mm.VMFlags
		bit uint64
	}{{mm.VM_READ, uapi.PROCMAP_QUERY_VMA_READABLE}, {mm.VM_WRITE, uapi.PROCMAP_QUERY_VMA_WRITABLE},
		{mm.VM_EXEC, uapi.PROCMAP_QUERY_VMA_EXECUTABLE}, {mm.VM_MAYSHARE, uapi.PROCMAP_QUERY_VMA_SHARED}} {
		if v.Flags&b.vm != 0 {
			karg.VMAFlags |= b.bit
		}
	}
	karg.VMAPageSize = pgtable.PageSize
	karg.VMAOffset, karg.Inode, karg.DevMajor, karg.DevMinor = 0, 0, 0, 0
	var inode *mm.Inode
	if v.File != nil {
		inode = v.File.Inode
		karg.VMAOffset = v.Pgoff << pgtable.PageShift
		karg.Inode = inode.Ino // the model has no devices: 00:00
	}
	var nm string
	if karg.VMANameSize != 0 {
		bufSize := min(pathMax, uint64(karg.VMANameSize))
		nm = vmaName(v)
		nameSize := uint64(0)
		if nm != "" {
			nameSize = uint64(len(nm)) + 1
		}
		if nameSize > bufSize {
			lc.teardown()
			return errno.ENAMETOOLONG
		}
		karg.VMANameSize = uint32(nameSize)
	}
	lc.teardown() // drop the VMA lock or the mmap lock before the copy-out

	if karg.BuildIDSize != 0 {
		var id []byte
		if inode != nil {
			id = inode.BuildID
		}
		if id == nil { // no file, or a file without a build ID: not an error
			karg.BuildIDSize = 0
		} else {
			if uint64(karg.BuildIDSize) < uint64(len(id)) {
				return errno.ENAMETOOLONG
			}
			karg.BuildIDSize = uint32(len(id))
		}
		if len(buildID) < int(karg.BuildIDSize) {
			return errno.EFAULT
		}
		copy(buildID, id)
	}
	if karg.VMANameSize != 0 {
		if len(name) < int(karg.VMANameSize) {
			return errno.EFAULT
		}
		copy(name, nm)
		name[len(nm)] = 0
	}
	karg.Size = q.Size
	orig := *q
	*q = karg
	restoreFrom(q, &orig, usize) // copy_to_user of min(sizeof, usize): the rest stays the caller's
	return nil
}

// queryLock is struct proc_maps_locking_ctx for one query.
type queryLock struct {
	f          *MapsFile
	mmapLocked bool
	locked     *mm.VMA // the VMA read-locked (After)
}

func (lc *queryLock) teardown() {
	if lc.mmapLocked {
		lc.f.m.MmapReadUnlock()
		lc.mmapLocked = false
	} else if lc.locked != nil {
		lc.f.m.VMAEndRead(lc.locked)
		lc.locked = nil
	}
}

// find mirrors query_vma_find_by_addr() (v6.17+ for After): under the mmap
// lock, find_vma; else drop the VMA locked so far and lock the next one in
// an RCU read section of its own, falling back to the mmap read lock if its
// reader count is at the limit.
func (lc *queryLock) find(addr uint64) (*mm.VMA, error) {
	f := lc.f
	if lc.mmapLocked {
		v := f.m.FindVMA(addr)
		f.preempt(f.m.MmapLock.Name())
		return v, nil
	}
	for {
		if lc.locked != nil {
			f.m.VMAEndRead(lc.locked)
			lc.locked = nil
		}
		f.rcuReadLock()
		v, err := f.m.LockNextVMA(f.opt.Waiter, addr, f.fallback)
		f.rcuReadUnlock()
		if errors.Is(err, mm.ErrVMARefLimit) {
			f.m.MmapReadLock(f.opt.Waiter)
			lc.mmapLocked = true
			return f.m.FindVMA(addr), nil
		}
		if v == nil || err != nil {
			return nil, err
		}
		lc.locked = v
		if f.brokenSkip(v.Start, true) {
			addr = v.End
			continue
		}
		f.preempt(mm.VMALockName) // the VMA's fields are read under its lock
		return v, nil
	}
}

// confirmedMatching is query_matching_vma() as do_procmap_query() calls it;
// in the mm.GapFixQueryConfirm design (a model choice the kernel does not
// make) an ENOENT found under per-VMA locks while an mmap write section was
// active (mm_lock_seq odd when the lookup began, or changed by its end: a
// writer may have had the range empty, as mremap_to() has between
// do_munmap() and move_vma()) is confirmed under mmap_read_lock, which waits
// for that writer: the lookup is redone there (query_vma_setup's Before
// locking) and its answer is the query's.
func (lc *queryLock) confirmedMatching(addr, flags uint64) (*mm.VMA, error) {
	m := lc.f.m
	seq := m.LockSeq().Raw()
	v, err := lc.matching(addr, flags)
	if !errors.Is(err, errno.ENOENT) || lc.mmapLocked || m.GapFix() != mm.GapFixQueryConfirm ||
		(seq&1 == 0 && m.LockSeq().Raw() == seq) {
		return v, err
	}
	lc.teardown()
	if err := m.MmapReadLockKillable(lc.f.opt.Waiter); err != nil {
		return nil, err
	}
	lc.mmapLocked = true
	return lc.matching(addr, flags)
}

// matching mirrors query_matching_vma().
func (lc *queryLock) matching(addr, flags uint64) (*mm.VMA, error) {
	for {
		v, err := lc.find(addr)
		if err != nil {
			return nil, err
		}
		if v == nil {
			return nil, errno.ENOENT
		}
		ok := flags&uapi.PROCMAP_QUERY_FILE_BACKED_VMA == 0 || v.File != nil
		if ok && flags&procmapQueryVMAFlags != 0 {
			var perm mm.VMFlags
			if flags&uapi.PROCMAP_QUERY_VMA_READABLE != 0 {
				perm |= mm.VM_READ
			}
			if flags&uapi.PROCMAP_QUERY_VMA_WRITABLE != 0 {
				perm |= mm.VM_WRITE
			}
			if flags&uapi.PROCMAP_QUERY_VMA_EXECUTABLE != 0 {
				perm |= mm.VM_EXEC
			}
			if flags&uapi.PROCMAP_QUERY_VMA_SHARED != 0 {
				perm |= mm.VM_MAYSHARE
			}
			ok = v.Flags&perm == perm
		}
		if ok && (flags&uapi.PROCMAP_QUERY_COVERING_OR_NEXT_VMA != 0 || v.Start <= addr) {
			return v, nil
		}
		addr = v.End // skip_vma
		if flags&uapi.PROCMAP_QUERY_COVERING_OR_NEXT_VMA == 0 {
			return nil, errno.ENOENT
		}
	}
}

// queryFields lists the struct's fields by their end offset, so that the
// copy in and out can honour a caller's shorter struct. It is an array, on
// the caller's stack: a slice would be allocated on every query.
func queryFields(q *uapi.ProcmapQuery) [15]struct {
	end uint64
	u64 *uint64
	u32 *uint32
} {
	type fld = struct {
		end uint64
		u64 *uint64
		u32 *uint32
	}
	return [...]fld{
		{8, &q.Size, nil}, {16, &q.QueryFlags, nil}, {24, &q.QueryAddr, nil},
		{32, &q.VMAStart, nil}, {40, &q.VMAEnd, nil}, {48, &q.VMAFlags, nil},
		{56, &q.VMAPageSize, nil}, {64, &q.VMAOffset, nil}, {72, &q.Inode, nil},
		{76, nil, &q.DevMajor}, {80, nil, &q.DevMinor}, {84, nil, &q.VMANameSize},
		{88, nil, &q.BuildIDSize}, {96, &q.VMANameAddr, nil}, {104, &q.BuildIDAddr, nil},
	}
}

// clearFrom zeroes the fields of q that lie past size bytes.
func clearFrom(q *uapi.ProcmapQuery, size uint64) {
	for _, fl := range queryFields(q) {
		if fl.end > size {
			if fl.u64 != nil {
				*fl.u64 = 0
			} else {
				*fl.u32 = 0
			}
		}
	}
}

// restoreFrom copies back from orig the fields of q past size bytes.
func restoreFrom(q, orig *uapi.ProcmapQuery, size uint64) {
	of := queryFields(orig)
	for i, fl := range queryFields(q) {
		if fl.end > size {
			if fl.u64 != nil {
				*fl.u64 = *of[i].u64
			} else {
				*fl.u32 = *of[i].u32
			}
		}
	}
}
