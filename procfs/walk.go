package procfs

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"mmlab/design"
	"mmlab/locking"
	"mmlab/mm"
	"mmlab/rcu"
	"mmlab/sched"
)

// Variant selects how a maps reader locks the address space: the design
// before seed 003 or after it. The zero Variant is unset: OpenMaps refuses
// it (design.ErrUnset).
type Variant int

// The two lock designs of /proc/PID/maps and PROCMAP_QUERY.
const (
	// Before: every read() chunk and every query holds the mmap read lock
	// (kernels up to 6.16).
	Before Variant = iota + 1
	// After: RCU lookups and one VMA read lock at a time, falling back to
	// the mmap read lock only when a VMA cannot be locked (6.17+).
	After
)

// Variants are the two designs, before first, named "before" and "after".
var Variants = design.NewSet[Variant]("maps walk variant", "before", "after")

// String returns "before" or "after".
func (v Variant) String() string { return Variants.String(v) }

// MarshalText returns the variant's name.
func (v Variant) MarshalText() ([]byte, error) { return Variants.Marshal(v) }

// UnmarshalText sets v to the variant named text.
func (v *Variant) UnmarshalText(text []byte) error { return Variants.Unmarshal(v, text) }

// parseName returns the value whose name in names is s, else an error
// wrapping errKind.
func parseName[T ~int](names []string, s string, errKind error) (T, error) {
	for v, name := range names {
		if name == s {
			return T(v), nil
		}
	}
	return 0, fmt.Errorf("%w %q: want %s", errKind, s, strings.Join(names, " or "))
}

// ChunkSize is the seq_file buffer (PAGE_SIZE) and the size of each read():
// one read() returns whole lines, fewer than ChunkSize bytes (one line at
// least). A line that would fill the buffer exactly counts as overflow, as
// fs/seq_file.c's seq_has_overflowed (count == size) has it, and waits for
// the next read().
const ChunkSize = 4096

// Preemption is the preemption model of the kernel code a maps read or
// query runs (CONFIG_PREEMPT_NONE or CONFIG_PREEMPT, or the preempt= boot
// parameter of a PREEMPT_DYNAMIC kernel), chosen at OpenMaps. The zero
// Preemption is PreemptNone.
type Preemption int

const (
	// PreemptNone: kernel code is never preempted. A reader gives up its
	// CPU when it sleeps on a lock, and otherwise only on its way back to
	// user space at the end of each read() and query (the schedule() of
	// exit_to_user_mode_loop when TIF_NEED_RESCHED is set). The live 6.18
	// kernel this project runs on boots so.
	PreemptNone Preemption = iota
	// PreemptFull: a reader can also be preempted wherever the kernel has
	// preemption enabled: holding the mmap read lock between two VMAs,
	// holding a VMA read lock while show_map_vma formats its line, and
	// inside the per-VMA walk's RCU read section (PREEMPT_RCU makes it
	// preemptible).
	PreemptFull
)

// preemptionNames are the names of the preemption models.
var preemptionNames = [...]string{PreemptNone: "none", PreemptFull: "full"}

// Preemptions are the names of the preemption models, none first: what
// ParsePreemption accepts and String returns.
var Preemptions = preemptionNames[:]

// String returns "none" or "full".
func (p Preemption) String() string { return preemptionNames[p] }

// Set parses a name as ParsePreemption does (p is a flag.Value).
func (p *Preemption) Set(s string) (err error) {
	*p, err = ParsePreemption(s)
	return err
}

// MarshalText returns p's name.
func (p Preemption) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText parses a name as ParsePreemption does.
func (p *Preemption) UnmarshalText(b []byte) error { return p.Set(string(b)) }

// ErrPreemption is returned by ParsePreemption for a name that is not a
// preemption model.
var ErrPreemption = errors.New("unknown preemption model")

// ParsePreemption returns the preemption model named s ("none" or "full").
func ParsePreemption(s string) (Preemption, error) {
	return parseName[Preemption](preemptionNames[:], s, ErrPreemption)
}

// Options configure a MapsFile.
type Options struct {
	Variant Variant
	// Preempt is the preemption model of the kernel code of reads and
	// queries: where Point is called.
	Preempt Preemption
	// Waiter is the reading task: lock sleeps go through it and its lock
	// waits are accounted to it. May be nil.
	Waiter locking.Waiter
	// Point, if set, is the reading task's preemption point (model tasks
	// pass sched.Thread.Point). A read or a query calls it on its way back
	// to user space, after it dropped its locks; with PreemptFull also
	// where the kernel code may be preempted: under the mmap read lock
	// (Before) or a VMA read lock (After) as each line is formatted, and
	// before the After walk's fallback takes the mmap read lock.
	Point func()
	// Thread, if set, is the reading task's model thread. With
	// PreemptNone the After walk's RCU read sections (rcu_read_lock in
	// lock_vma_range and query_vma_find_by_addr) are then classic read
	// sections on it (rcu.ReadLock), which rcu.Classic's Synchronize waits
	// for. Not needed if Waiter names its thread (rcu.OnThread). With
	// PreemptFull they are preemptible (PREEMPT_RCU), which rcu.Classic
	// does not track: a model choice; mm never waits for a grace period
	// (see its per-VMA lock comment), so no waiter misses them.
	Thread *sched.Thread
	// VMACost is, on a simulated machine, the kernel time one VMA takes:
	// a read()'s show_map_vma and the walk's step to the next VMA, or a
	// query's lookup, charged (sched.Charge) under the lock that keeps the
	// VMA stable. 0 charges nothing; outside sim mode it is ignored.
	VMACost time.Duration
}

// brokenSkip reports whether f's test hook skips the VMA starting at start.
func (f *MapsFile) brokenSkip(start uint64, query bool) bool {
	return f.skip != nil && f.skip(start, query)
}

// MapsFile is an open /proc/PID/maps of a model address space: a seq_file
// position that read() chunks advance, and the PROCMAP_QUERY ioctl.
// A MapsFile is used by one reader at a time.
type MapsFile struct {
	m    *mm.MM
	opt  Options
	pos  uint64 // where the next chunk resumes (see Read)
	done bool   // the walk reached the end (SENTINEL_VMA_END)
	buf  []byte

	rcuTh  *sched.Thread // the thread of classic RCU read sections (PreemptNone), or nil
	rcuIdx int           // of the open read section
	held   string        // what the reader holds while in Options.Point (Holding)

	// skip, set only from export_test.go, makes the After text walk
	// (query false) and query (query true) of this file pass over the
	// VMAs it names by their start, as a reader with a broken walk would,
	// so that a tearing checker can prove it reports the gap.
	skip func(start uint64, query bool) bool
}

// OpenMaps opens m's maps file for a reader with opt; it refuses an unset
// opt.Variant (design.ErrUnset).
func OpenMaps(m *mm.MM, opt Options) (*MapsFile, error) {
	if err := Variants.Check(opt.Variant); err != nil {
		return nil, fmt.Errorf("procfs: %w", err)
	}
	if opt.Thread != nil {
		opt.Waiter = threadWaiter{opt.Waiter, opt.Thread}
	}
	f := &MapsFile{m: m, opt: opt, buf: make([]byte, 0, 2*ChunkSize)}
	if opt.Preempt == PreemptNone {
		f.rcuTh = rcu.ThreadOf(opt.Waiter)
	}
	return f, nil
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

// userReturn is the preemption point on the way back to user space.
func (f *MapsFile) userReturn() {
	if f.opt.Point != nil {
		f.opt.Point()
	}
}

// preempt is a preemption point inside kernel code, holding the lock named
// held ("" for none): one with PreemptFull only.
func (f *MapsFile) preempt(held string) {
	if f.opt.Preempt == PreemptFull && f.opt.Point != nil {
		f.held = held
		f.opt.Point()
		f.held = ""
	}
}

// Holding names the lock the reader holds while it is in Options.Point:
// the mmap lock's name ("mmap_lock") or mm.VMALockName ("vma_lock"), or ""
// for none (an RCU read section is not a lock a writer waits for). It is
// the wait accounting's answer to who held what while preempted.
func (f *MapsFile) Holding() string { return f.held }

// rcuReadLock and rcuReadUnlock enter and leave the walk's RCU read
// section: a classic one on the reader's thread with PreemptNone (see
// Options.Thread).
func (f *MapsFile) rcuReadLock()   { f.rcuIdx = rcu.ReadLock(f.rcuTh) }
func (f *MapsFile) rcuReadUnlock() { rcu.ReadUnlock(f.rcuTh, f.rcuIdx) }

// Read mirrors one read() of ChunkSize bytes: whole lines, fewer than
// ChunkSize bytes (one line at least), or an empty slice at the end. The
// slice is valid until the next Read. Mirrors fs/seq_file.c:seq_read_iter()
// over fs/proc/task_mmu.c's m_start/m_next/m_stop: the lock is taken at the
// start of the chunk and dropped at its end. Where the next chunk resumes
// depends on the version each walk models: Before (v6.16) at the first VMA
// not yet shown (*ppos = vma->vm_start in proc_get_vma), After (v6.17+) at
// the end of the last VMA shown (priv->last_pos), so that a VMA that grew
// past that point meanwhile is shown again. A VMA mapped throughout is never
// skipped.
//
// An error (EINTR: the reader has a fatal signal pending and slept on a
// lock) is returned only if the chunk is empty, as seq_read_iter does; the
// model then resumes where that chunk ended (the kernel's reader dies
// before it could read again).
func (f *MapsFile) Read() ([]byte, error) {
	f.buf = f.buf[:0]
	if f.done {
		return f.buf, nil
	}
	var err error
	if f.opt.Variant == Before {
		err = f.readLocked()
	} else {
		err = f.readVMALocked()
	}
	f.userReturn()
	if len(f.buf) > 0 {
		err = nil
	}
	return f.buf, err
}

// add appends v's line unless the chunk overflows (seq_has_overflowed:
// the line reaches ChunkSize); reports whether it did. The first line of a
// chunk is always kept (seq_read_iter would retry it in a bigger buffer;
// maps lines are far shorter than a page).
func (f *MapsFile) add(v *mm.VMA) bool {
	sched.Charge(f.opt.VMACost)
	n := len(f.buf)
	f.buf = ShowMapVMA(f.buf, v)
	if len(f.buf) >= ChunkSize && n > 0 {
		f.buf = f.buf[:n] // the record that overflows waits for the next read
		return false
	}
	f.pos = v.End
	return true
}

// readLocked is the Before chunk as v6.16 has it: mmap_read_lock_killable
// in m_start, vma_next under it, mmap_read_unlock in m_stop; the next chunk
// resumes at the start of the VMA that did not fit.
func (f *MapsFile) readLocked() error {
	if err := f.m.MmapReadLockKillable(f.opt.Waiter); err != nil {
		return err
	}
	defer f.m.MmapReadUnlock()
	// vma_iter_init at the resume position, then vma_next: the tree is
	// stable under the lock, so one iterator serves the whole chunk.
	for _, v := range f.m.Tree().From(f.pos) {
		f.preempt(f.m.MmapLock.Name()) // show_map_vma under the mmap read lock
		if !f.add(v) {
			f.pos = v.Start
			return nil
		}
	}
	f.done = true
	return nil
}

// walkLock is struct proc_maps_locking_ctx of a chunk of the After walk.
type walkLock struct {
	f          *MapsFile
	mmapLocked bool    // fell back to the mmap read lock for the rest of the chunk
	locked     *mm.VMA // the VMA read-locked (locked_vma)
}

// next mirrors proc_get_vma() over get_next_vma() (v6.17+): drop the
// current VMA's read lock, then lock the next VMA ending above pos, falling
// back to the mmap read lock for the rest of the chunk if its reader count
// is at the limit (fallback_to_mmap_lock, not killable).
func (lc *walkLock) next(pos uint64) (*mm.VMA, error) {
	f := lc.f
	for {
		if lc.mmapLocked {
			return f.m.FindVMA(pos), nil // vma_next under the mmap lock
		}
		lc.unlockVMA()
		v, err := f.m.LockNextVMA(f.opt.Waiter, pos, f.fallback)
		if errors.Is(err, mm.ErrVMARefLimit) {
			f.rcuReadUnlock()
			f.m.MmapReadLock(f.opt.Waiter)
			lc.mmapLocked = true
			continue
		}
		lc.locked = v
		return v, err
	}
}

// holding names the lock the chunk holds now (see MapsFile.Holding).
func (lc *walkLock) holding() string {
	if lc.mmapLocked {
		return lc.f.m.MmapLock.Name()
	}
	return mm.VMALockName
}

// unlockVMA mirrors unlock_ctx_vma().
func (lc *walkLock) unlockVMA() {
	if lc.locked != nil {
		lc.f.m.VMAEndRead(lc.locked)
		lc.locked = nil
	}
}

// stop mirrors unlock_vma_range() in m_stop.
func (lc *walkLock) stop() {
	if lc.mmapLocked {
		lc.f.m.MmapReadUnlock()
		return
	}
	lc.unlockVMA()
	lc.f.rcuReadUnlock()
}

// readVMALocked is the After chunk as v6.17+ has it: lock_vma_range enters
// an RCU read section for the whole chunk; each VMA is read-locked by
// lock_next_vma and stays locked while its line is formatted and until the
// next VMA is looked up (get_next_vma), the last one until m_stop, which
// also leaves the RCU section.
func (f *MapsFile) readVMALocked() error {
	f.rcuReadLock()
	lc := walkLock{f: f}
	defer lc.stop()
	pos := f.pos
	for {
		v, err := lc.next(pos)
		if err != nil || v == nil {
			f.done = err == nil
			return err
		}
		pos = v.End
		if f.brokenSkip(v.Start, false) {
			continue
		}
		f.preempt(lc.holding()) // show_map_vma under the VMA read lock
		if !f.add(v) {
			return nil
		}
	}
}

// fallback is LockNextVMA's hook: it leaves the RCU read section before
// the mmap read lock is taken (a preemption point with PreemptFull) and
// enters it again after.
func (f *MapsFile) fallback(before bool) {
	if before {
		f.rcuReadUnlock()
		f.preempt("")
	} else {
		f.rcuReadLock()
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
