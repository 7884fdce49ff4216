// Package procfs renders a model address space as the kernel's
// /proc/PID/maps text (fs/proc/task_mmu.c), byte for byte: the same widths,
// padding and names. The model has no devices: file mappings show dev 00:00
// and the model file's stable non-zero inode number.
//
// A MapsFile is an open maps file: read() chunks of whole lines under 4 KiB,
// and the PROCMAP_QUERY ioctl, under either lock design of seed 003
// (Variant): Before (v6.16) holds the mmap read lock for each chunk and each
// query; After (v6.17+, as in v6.19) reads the VMA tree in an RCU read
// section that spans the chunk and holds one VMA read lock at a time
// (lock_next_vma), falling back to the mmap read lock when a VMA cannot be
// locked. The preemption model of the kernel code (Preemption) says where a
// reader can be preempted.
//
// Lock order (outermost first; each line starts with a lock class of
// package mmlab/locking/lockrank, whose Order its tests check this tree
// against):
//
//	rcu_read_lock    RCU read section (After: one chunk, lock_vma_range to m_stop; one lookup of a query)
//	  vma_lock       VMA read lock (one at a time: get_next_vma drops one before it locks the next)
//	mmap_lock        mmap read lock (Before: one chunk or query; After: the fallback, outside the RCU section)
//	  vma_lock       VMA read lock (the fallback's vma_start_read_locked; mm's order)
package procfs

import (
	"strconv"

	"mmlab/locking"
	"mmlab/mm"
	"mmlab/mm/pgtable"
)

// nameColumn is seq_setwidth(m, 25 + sizeof(void *) * 6 - 1): the name
// starts after the prefix is padded to this width and one more space.
const nameColumn = 25 + 8*6 - 1

// putHex mirrors seq_put_hex_ll(): optional delimiter, then v in lowercase
// hex zero-padded to width digits.
func putHex(buf []byte, delim string, v uint64, width int) []byte {
	buf = append(buf, delim...)
	var tmp [16]byte
	s := strconv.AppendUint(tmp[:0], v, 16)
	for i := len(s); i < width; i++ {
		buf = append(buf, '0')
	}
	return append(buf, s...)
}

// showVMAHeaderPrefix mirrors show_vma_header_prefix().
func showVMAHeaderPrefix(buf []byte, start, end uint64, flags mm.VMFlags, pgoff uint64, major, minor, ino uint64) []byte {
	buf = putHex(buf, "", start, 8)
	buf = putHex(buf, "-", end, 8)
	buf = append(buf, ' ')
	buf = append(buf, flags.String()...)
	buf = putHex(buf, " ", pgoff, 8)
	buf = putHex(buf, " ", major, 2)
	buf = putHex(buf, ":", minor, 2)
	buf = append(buf, ' ')
	buf = strconv.AppendUint(buf, ino, 10)
	return append(buf, ' ')
}

// ShowMapVMA mirrors fs/proc/task_mmu.c:show_map_vma(): append vma's maps
// line, newline included, to buf. The caller keeps vma stable (mmap read
// lock or a VMA read lock).
func ShowMapVMA(buf []byte, vma *mm.VMA) []byte {
	lineStart := len(buf)
	var pgoff, ino uint64
	name := vma.Name
	if vma.File != nil {
		ino = vma.File.Inode.Ino
		pgoff = vma.Pgoff << pgtable.PageShift
		name = vma.File.Inode.Name
	}
	buf = showVMAHeaderPrefix(buf, vma.Start, vma.End, vma.Flags, pgoff, 0, 0, ino)
	if name != "" {
		// seq_pad(m, ' '): spaces up to the width, then one space.
		for len(buf)-lineStart < nameColumn {
			buf = append(buf, ' ')
		}
		buf = append(buf, ' ')
		buf = append(buf, name...)
	}
	return append(buf, '\n')
}

// Maps returns the whole /proc/PID/maps text of m, walked under the mmap
// read lock (the classic m_start/m_next walk, as one chunk). MapsFile reads
// it in chunks, with either lock design.
func Maps(m *mm.MM) string {
	return string(AppendMaps(nil, m, nil, 0, ^uint64(0)))
}

// AppendMaps appends the maps lines of the VMAs of m that overlap [lo, hi)
// to buf, walking under the mmap read lock taken for w.
func AppendMaps(buf []byte, m *mm.MM, w locking.Waiter, lo, hi uint64) []byte {
	walk(m, w, func(v *mm.VMA) bool {
		if v.Start >= hi {
			return false
		}
		if v.End > lo {
			buf = ShowMapVMA(buf, v)
		}
		return true
	})
	return buf
}

// walk visits m's VMAs in address order under the mmap read lock until fn
// returns false.
func walk(m *mm.MM, w locking.Waiter, fn func(v *mm.VMA) bool) {
	m.MmapReadLock(w)
	defer m.MmapReadUnlock()
	for _, v := range m.Tree().All() {
		if !fn(v) {
			return
		}
	}
}
