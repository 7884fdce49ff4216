package mm

import (
	"slices"

	"mmlab/locking"
	"mmlab/locking/lockrank"
	"mmlab/mm/pgtable"
)

// Inode mirrors struct inode + its address_space: a file's identity, size,
// page cache and i_mmap (the VMAs mapping it).
type Inode struct {
	// Ino is the inode number: stable, non-zero and unique in the
	// Namespace the inode was made in.
	Ino uint64
	// Name is the path /proc/PID/maps shows.
	Name string
	// Size is i_size in bytes.
	Size uint64
	// Shmem marks the inode of shared anonymous memory (shmem_zero_setup).
	Shmem bool
	// Cache is the page cache, filled on first access.
	Cache *pgtable.Cache
	// BuildID is the NT_GNU_BUILD_ID note build_id_parse_file() would find
	// in the file (at most BUILD_ID_SIZE_MAX, 20 bytes); nil for none.
	BuildID []byte

	// IMmapRwsem is i_mmap_rwsem: it protects iMmap. Order: inside the
	// mmap lock and VMA locks, outside anon_vma and PTE locks.
	IMmapRwsem locking.RWSem
	iMmap      []*VMA
}

// NewInode returns an inode of ns of size bytes whose byte at offset off is
// content(off) (bytes past size read as zero). Its number is the next of
// ns, as get_next_ino() gives one.
func NewInode(ns *Namespace, name string, size uint64, content func(off uint64) byte) *Inode {
	in := &Inode{Ino: ns.lastIno.Add(1), Name: name, Size: size}
	in.IMmapRwsem.SetName("i_mmap_rwsem")
	in.IMmapRwsem.SetClass(lockrank.IMmapRwsem)
	in.Cache = pgtable.NewCache(func(index uint64, p *pgtable.Page) {
		if content == nil {
			return
		}
		base := index << pgtable.PageShift
		if base >= size {
			return
		}
		d := p.Bytes()
		for i := uint64(0); i < pgtable.PageSize && base+i < size; i++ {
			d[i] = content(base + i)
		}
	})
	return in
}

// newShmemInode mirrors shmem_zero_setup(): the inode of ns behind a shared
// anonymous mapping of size bytes, shown as "/dev/zero (deleted)".
func newShmemInode(ns *Namespace, size uint64) *Inode {
	in := NewInode(ns, "/dev/zero (deleted)", size, nil)
	in.Shmem = true
	return in
}

// pagesInFile is the number of pages holding file data (faults at or past it
// raise SIGBUS).
func (in *Inode) pagesInFile() uint64 {
	return (in.Size + pgtable.PageSize - 1) >> pgtable.PageShift
}

// IMmap returns the VMAs mapping any page in [pgoff, pgoff+n), in i_mmap
// order (vma_interval_tree_foreach). Takes i_mmap_rwsem for read.
func (in *Inode) IMmap(pgoff, n uint64) []*VMA {
	in.IMmapRwsem.DownRead(nil)
	defer in.IMmapRwsem.UpRead()
	var out []*VMA
	for _, v := range in.iMmap {
		if v.Pgoff < pgoff+n && pgoff < v.Pgoff+v.Pages() {
			out = append(out, v)
		}
	}
	return out
}

// iMmapInsertAfter links v into i_mmap right after after (or at the end).
func (in *Inode) iMmapInsertAfter(v, after *VMA) {
	in.IMmapRwsem.DownWrite(nil)
	defer in.IMmapRwsem.UpWrite()
	if i := slices.Index(in.iMmap, after); after != nil && i >= 0 {
		in.iMmap = slices.Insert(in.iMmap, i+1, v)
		return
	}
	in.iMmap = append(in.iMmap, v)
}

func (in *Inode) iMmapRemove(v *VMA) {
	in.IMmapRwsem.DownWrite(nil)
	defer in.IMmapRwsem.UpWrite()
	if i := slices.Index(in.iMmap, v); i >= 0 {
		in.iMmap = slices.Delete(in.iMmap, i, i+1)
	}
}

// File mirrors struct file: one open file description. VMAs merge only
// when they map the same File (the same pointer, as vma->vm_file).
type File struct {
	Inode *Inode
}

// Open returns a new open file description of in (read-write).
func Open(in *Inode) *File { return &File{Inode: in} }
