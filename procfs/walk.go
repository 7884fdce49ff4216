package procfs

import (
	"errors"
	"fmt"
	"time"

	"mmlab/locking"
	"mmlab/mm"
	"mmlab/sched"
)

// Variant selects how a maps reader locks the address space: the design
// before seed 003 or after it. The zero Variant is After.
type Variant int

// The two lock designs of /proc/PID/maps and PROCMAP_QUERY.
const (
	// After: RCU lookups and one VMA read lock at a time, falling back to
	// the mmap read lock only when a VMA cannot be locked (6.17+).
	After Variant = iota
	// Before: every read() chunk and every query holds the mmap read lock
	// (kernels up to 6.16).
	Before
)

// variantNames are the names of the variants.
var variantNames = [...]string{Before: "before", After: "after"}

// Variants are the names of the two designs, in the order before, after:
// what ParseVariant accepts and String returns.
var Variants = []string{variantNames[Before], variantNames[After]}

// String returns "before" or "after".
func (v Variant) String() string { return variantNames[v] }

// ErrVariant is returned by ParseVariant for a name that is not a variant.
var ErrVariant = errors.New("unknown maps walk variant")

// ParseVariant returns the variant named s ("before" or "after").
func ParseVariant(s string) (Variant, error) {
	for v, name := range variantNames {
		if name == s {
			return Variant(v), nil
		}
	}
	return 0, fmt.Errorf("%w %q: want before or after", ErrVariant, s)
}

// ChunkSize is the seq_file buffer: one read() returns whole lines up to
// this many bytes (PAGE_SIZE).
const ChunkSize = 4096

// Options configure a MapsFile.
type Options struct {
	Variant Variant
	// Waiter is the reading task: lock sleeps go through it and its lock
	// waits are accounted to it. May be nil.
	Waiter locking.Waiter
	// Point, if set, is called at every preemption point of a read or a
	// query: before each lock is taken, and where the walk moves from one
	// VMA to the next. There the Before walk holds the mmap read lock (as
	// the kernel's does across a whole chunk), while the After walk holds
	// nothing: get_next_vma drops one VMA's lock before it locks the next.
	// Model tasks pass sched.Thread.Point.
	Point func()
	// Thread, if set, is the reading task's model thread: the After walk's
	// lock-free lookups (mm.LockNextVMA) then run in classic RCU read
	// sections on it (rcu.ReadLock), as the kernel's do under
	// rcu_read_lock(). Not needed if Waiter names its thread
	// (rcu.OnThread).
	Thread *sched.Thread
}

// hooks are the package's test hooks, set only from export_test.go.
var hooks struct {
	// brokenSkip, if set, makes the After text walk (query false) and
	// query (query true) pass over the VMAs it names by their start, as a
	// reader with a broken walk would, so that a tearing checker can prove
	// it reports the gap.
	brokenSkip func(start uint64, query bool) bool
}

// brokenSkip reports whether the test hook skips the VMA starting at start.
func brokenSkip(start uint64, query bool) bool {
	return hooks.brokenSkip != nil && hooks.brokenSkip(start, query)
}

// MapsFile is an open /proc/PID/maps of a model address space: a seq_file
// position that read() chunks advance, and the PROCMAP_QUERY ioctl.
// A MapsFile is used by one reader at a time.
type MapsFile struct {
	m    *mm.MM
	opt  Options
	pos  uint64 // where the next chunk resumes: the end of the last VMA shown
	done bool   // the walk reached the end (SENTINEL_VMA_END)
	buf  []byte
}

// OpenMaps opens m's maps file for a reader with opt.
func OpenMaps(m *mm.MM, opt Options) *MapsFile {
	if opt.Thread != nil {
		opt.Waiter = threadWaiter{opt.Waiter, opt.Thread}
	}
	return &MapsFile{m: m, opt: opt, buf: make([]byte, 0, 2*ChunkSize)}
}

// threadWaiter is Options.Waiter (w, may be nil) naming Options.Thread for
// mm's classic RCU read sections (rcu.OnThread). It passes on what the locks
// ask of the task: sleeps go through w if it can sleep, else through th.
type threadWaiter struct {
	w  locking.Waiter
	th *sched.Thread
}

func (tw threadWaiter) Thread() *sched.Thread { return tw.th }
func (tw threadWaiter) CPU() int              { return tw.th.CPU() }

func (tw threadWaiter) Fatal() <-chan struct{} {
	if tw.w == nil {
		return nil
	}
	return tw.w.Fatal()
}

func (tw threadWaiter) Block(wait func()) {
	if b, ok := tw.w.(locking.Blocker); ok {
		b.Block(wait)
	} else {
		tw.th.Block(wait)
	}
}

func (tw threadWaiter) RecordBlocked(lock string, d time.Duration) {
	if br, ok := tw.w.(locking.BlockRecorder); ok {
		br.RecordBlocked(lock, d)
	}
}

// Rewind mirrors lseek(fd, 0, SEEK_SET): the next Read starts at the first VMA.
func (f *MapsFile) Rewind() { f.pos, f.done = 0, false }

func (f *MapsFile) point() {
	if f.opt.Point != nil {
		f.opt.Point()
	}
}

// Read mirrors one read() of ChunkSize bytes: whole lines, at most
// ChunkSize bytes (one line at least), or an empty slice at the end. The
// slice is valid until the next Read. Mirrors fs/seq_file.c:seq_read_iter()
// over fs/proc/task_mmu.c's m_start/m_next/m_stop: the lock is taken at
// the start of the chunk and dropped at its end, and the next chunk resumes
// at the end of the last VMA it showed (priv->last_pos), so a VMA that grew
// past that point meanwhile is shown again; a VMA never is skipped.
func (f *MapsFile) Read() ([]byte, error) {
	f.buf = f.buf[:0]
	if f.done {
		return f.buf, nil
	}
	var err error
	if f.opt.Variant == Before {
		err = f.readLocked()
	} else {
		f.readVMALocked()
	}
	return f.buf, err
}

// add appends v's line unless the chunk is full; reports whether it did.
func (f *MapsFile) add(v *mm.VMA) bool {
	n := len(f.buf)
	f.buf = ShowMapVMA(f.buf, v)
	if len(f.buf) > ChunkSize && n > 0 {
		f.buf = f.buf[:n] // seq_file: the record that overflows waits for the next read
		return false
	}
	f.pos = v.End
	return true
}

// readLocked is the Before chunk: mmap_read_lock_killable in m_start,
// vma_next under it, mmap_read_unlock in m_stop.
func (f *MapsFile) readLocked() error {
	f.point()
	if err := f.m.MmapReadLockKillable(f.opt.Waiter); err != nil {
		return err
	}
	defer f.m.MmapReadUnlock()
	// vma_iter_init at the resume position, then vma_next: the tree is
	// stable under the lock, so one iterator serves the whole chunk.
	for _, v := range f.m.Tree().From(f.pos) {
		if !f.add(v) {
			return nil
		}
		f.point()
	}
	f.done = true
	return nil
}

// readVMALocked is the After chunk: lock_vma_range (RCU), then
// get_next_vma's lock_next_vma for each VMA, which keeps only the current
// VMA read-locked and falls back to the mmap read lock when it must.
func (f *MapsFile) readVMALocked() {
	for {
		v := f.m.LockNextVMA(f.opt.Waiter, f.pos, f.fallback)
		if v == nil {
			f.done = true
			return
		}
		if brokenSkip(v.Start, false) {
			f.pos = v.End
			f.m.VMAEndRead(v)
			continue
		}
		ok := f.add(v)
		f.m.VMAEndRead(v) // get_next_vma's unlock_ctx_vma, before locking the next
		if !ok {
			return
		}
		f.point()
	}
}

// fallback is LockNextVMA's hook: a preemption point before it takes the
// mmap read lock.
func (f *MapsFile) fallback(before bool) {
	if before {
		f.point()
	}
}

// ReadAll reads the whole file from the start, chunk by chunk, and appends
// it to dst.
func (f *MapsFile) ReadAll(dst []byte) ([]byte, error) {
	f.Rewind()
	for {
		b, err := f.Read()
		if err != nil {
			return dst, err
		}
		if len(b) == 0 {
			return dst, nil
		}
		dst = append(dst, b...)
	}
}
