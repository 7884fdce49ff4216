package locking

import (
	"runtime"

	"mmlab/sched"
	"mmlab/smp"
)

// SeqCount is a sequence counter (include/linux/seqlock.h, seqcount_t): odd
// while a write section is open. Writers must be serialised by a lock of the
// caller's (for mm_lock_seq, the mmap write lock). The zero value is even.
type SeqCount struct {
	// seq is s->sequence: READ_ONCE by readers; the serialised writers
	// increment it with a plain load and store (s->sequence++), as the
	// kernel does.
	seq smp.Uint64
}

// SetName names the counter's word (package smp). Call it before the
// counter is shared.
func (c *SeqCount) SetName(name string) { c.seq.Init(name) }

// WriteBegin opens a write section: the sequence becomes odd. Mirrors
// write_seqcount_begin().
func (c *SeqCount) WriteBegin() {
	s := c.seq.Load() + 1
	if s&1 == 0 {
		panic("locking: SeqCount.WriteBegin inside a write section")
	}
	c.seq.Store(s)
}

// WriteEnd closes the write section: the sequence becomes even again, with
// release semantics. Mirrors write_seqcount_end().
func (c *SeqCount) WriteEnd() {
	s := c.seq.Load() + 1
	if s&1 != 0 {
		panic("locking: SeqCount.WriteEnd outside a write section")
	}
	c.seq.Store(s)
}

// ReadBegin waits until no write section is open and returns the (even)
// sequence. Mirrors read_seqcount_begin(). It spins (yielding the goroutine,
// not a model CPU), so use it only where writers do not sleep inside their
// write section; where they may (mm_lock_seq), read Raw and give up on odd.
func (c *SeqCount) ReadBegin() uint64 {
	for {
		s := c.seq.Load()
		if s&1 == 0 {
			return s
		}
		if sched.Current() != nil {
			// Only one thread runs: spinning would never end.
			panic("locking: SeqCount write section open across a preemption point")
		}
		runtime.Gosched() // the kernel's cpu_relax()
	}
}

// ReadRetry reports whether a write section opened since ReadBegin returned
// seq, so that what was read must be read again. Mirrors
// read_seqcount_retry().
func (c *SeqCount) ReadRetry(seq uint64) bool {
	return c.seq.Load() != seq
}

// Raw returns the sequence without waiting (raw_read_seqcount()); odd means
// a write section is open.
func (c *SeqCount) Raw() uint64 {
	return c.seq.Load()
}
