// Package lockrank declares the lock classes of the model and their partial
// order, once, as the Go runtime's lockrank.go declares its locks' ranks
// (runtime/mklockrank.go): every lock that takes part in the order names
// its Class at construction, every package doc's "Lock order" tree is
// checked against Order by this package's tests, and, built with -tags
// invariants, a deterministic run of package sched checks every
// acquisition it records (sched.AcquiredClass) with Check.
//
// a < b in Order means b may be taken while a is held; Check allows the
// transitive closure. A class is never taken while a lock of the same class
// is held, unless at a higher subclass (lockdep's subclasses: a fork
// child's mmap_lock inside its parent's is
// mmap_write_lock_nested(mm, SINGLE_DEPTH_NESTING)). Trylocks are not
// checked, as lockdep does not order them: a trylock cannot wait, so it
// cannot close a cycle.
//
// Only the locks of package locking (RWSem, PercpuRWSem, Mutex) are
// recorded by sched, so only their classes are checked at run time; the
// other classes (sync.Mutex leaves, the per-VMA lock, RCU read sections)
// are here so that each package's tree is checked against one order.
package lockrank

import (
	"errors"
	"fmt"
	"strings"
)

// SingleDepthNesting is lockdep's SINGLE_DEPTH_NESTING: the subclass of a
// second lock of a class taken inside the first.
const SingleDepthNesting uint8 = 1

// Class is a lock class (lockdep's lock_class_key, the runtime's
// lockRank).
type Class uint8

// The classes, by the kernel's names where the model has the kernel's lock.
const (
	None Class = iota // not ranked: never checked

	RegisterRwsem    // uprobe->register_rwsem
	DupMmapSem       // dup_mmap_sem (percpu_rw_semaphore)
	MmapLock         // mm->mmap_lock
	VMALock          // the per-VMA lock (vma->vm_refcnt)
	IMmapRwsem       // inode->i_mapping->i_mmap_rwsem
	PageTableLock    // mm->page_table_lock
	AnonVMA          // anon_vma->root->rwsem
	PTL              // split PTE locks
	UprobesMmapMutex // uprobes_mmap_mutex[]
	ConsumerRwsem    // uprobe->consumer_rwsem
	UprobesTreelock  // uprobes_treelock + uprobes_seqcount
	XOLArea          // the XOL slot bitmap
	RCURead          // a classic RCU read section (rcu_read_lock_map)
	UprobesSRCU      // the uprobe hit path's read section (SRCU or Tasks Trace)
	RCUGPMutex       // a flavour's grace-period mutex (srcu_gp_mutex, ...)
	Runqueue         // sched's CPU.rq
	TrcGP            // one Tasks Trace grace period's holdout count
	RCUCallbacks     // an RCU flavour's callback list
	Tasklist         // sched's System.mu
	numClasses
)

var names = [numClasses]string{
	None:             "none",
	RegisterRwsem:    "register_rwsem",
	DupMmapSem:       "dup_mmap_sem",
	MmapLock:         "mmap_lock",
	VMALock:          "vma_lock",
	IMmapRwsem:       "i_mmap_rwsem",
	PageTableLock:    "page_table_lock",
	AnonVMA:          "anon_vma",
	PTL:              "ptl",
	UprobesMmapMutex: "uprobes_mmap_mutex",
	ConsumerRwsem:    "consumer_rwsem",
	UprobesTreelock:  "uprobes_treelock",
	XOLArea:          "xol_area",
	RCURead:          "rcu_read_lock",
	UprobesSRCU:      "uprobes_srcu",
	RCUGPMutex:       "rcu_gp_mutex",
	Runqueue:         "rq",
	TrcGP:            "trc_gp",
	RCUCallbacks:     "rcu_callbacks",
	Tasklist:         "tasklist",
}

func (c Class) String() string {
	if c < numClasses {
		return names[c]
	}
	return fmt.Sprintf("Class(%d)", c)
}

// ParseClass returns the class named name, as String prints it.
func ParseClass(name string) (Class, bool) {
	for c, n := range names {
		if n == name && Class(c) != None {
			return Class(c), true
		}
	}
	return None, false
}

// Order is the partial order, one "outer < inner, inner" per line. It is
// the union of the package docs' trees (mm, uprobes, procfs, rcu, sched;
// the tests check both ways), the order of the header comment of the
// kernel's mm/rmap.c restricted to what the model has, and what uprobes and
// rcu nest across packages.
const Order = `
register_rwsem < dup_mmap_sem, rcu_gp_mutex
dup_mmap_sem < mmap_lock, i_mmap_rwsem
mmap_lock < vma_lock, uprobes_mmap_mutex
vma_lock < i_mmap_rwsem
i_mmap_rwsem < page_table_lock
page_table_lock < anon_vma
anon_vma < ptl
uprobes_mmap_mutex < consumer_rwsem
consumer_rwsem < uprobes_treelock
uprobes_treelock < xol_area
rcu_read_lock < vma_lock
uprobes_srcu < mmap_lock
rcu_gp_mutex < rq
rq < trc_gp
trc_gp < rcu_callbacks
`

// edges are Order's pairs; after[a] has bit b when a < b in the closure.
var (
	edges [][2]Class
	after [numClasses]uint64
)

func init() {
	edges = parse(Order)
	for _, e := range edges {
		after[e[0]] |= 1 << e[1]
	}
	// Transitive closure (Warshall).
	for k := range numClasses {
		for i := range numClasses {
			if after[i]&(1<<k) != 0 {
				after[i] |= after[k]
			}
		}
	}
	for c := range numClasses {
		if after[c]&(1<<c) != 0 {
			panic("lockrank: Order has a cycle through " + c.String())
		}
	}
}

// parse reads Order's lines.
func parse(order string) [][2]Class {
	var es [][2]Class
	for line := range strings.Lines(order) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		outer, inners, ok := strings.Cut(line, "<")
		if !ok {
			panic("lockrank: Order line without <: " + line)
		}
		a := mustClass(outer)
		for in := range strings.SplitSeq(inners, ",") {
			es = append(es, [2]Class{a, mustClass(in)})
		}
	}
	return es
}

func mustClass(name string) Class {
	c, ok := ParseClass(strings.TrimSpace(name))
	if !ok {
		panic("lockrank: Order names an unknown class " + strings.TrimSpace(name))
	}
	return c
}

// Edges returns Order's pairs (outer, inner), as declared.
func Edges() [][2]Class { return edges }

// Before reports whether inner may be taken while outer is held.
func Before(outer, inner Class) bool { return after[outer]&(1<<inner) != 0 }

// ErrOrder is what Check's errors are (errors.Is).
var ErrOrder = errors.New("lock order violated")

// OrderError is ErrOrder: a lock of class Class, subclass Sub, was taken
// while one of class Held, subclass HeldSub, was held.
type OrderError struct {
	Held    Class
	HeldSub uint8
	Class   Class
	Sub     uint8
}

func (e *OrderError) Error() string {
	if e.Held == e.Class {
		return fmt.Sprintf("%v: %v (subclass %d) taken holding %v (subclass %d); nesting within a class needs a higher subclass",
			ErrOrder, e.Class, e.Sub, e.Held, e.HeldSub)
	}
	return fmt.Sprintf("%v: %v taken holding %v, but Order has no %v < %v", ErrOrder, e.Class, e.Held, e.Held, e.Class)
}

func (e *OrderError) Is(target error) bool { return target == ErrOrder }

// Check reports whether a lock of class c, subclass sub, may be taken while
// one of class held, subclass heldSub, is held: nil, or an *OrderError.
// None on either side is never an error.
func Check(held Class, heldSub uint8, c Class, sub uint8) error {
	switch {
	case held == None || c == None:
		return nil
	case held == c && sub > heldSub:
		return nil
	case held != c && Before(held, c):
		return nil
	}
	return &OrderError{Held: held, HeldSub: heldSub, Class: c, Sub: sub}
}

// An Exemption names inversions of Order that a design of the model makes on
// purpose: in a run that has it (sched.System.ExemptLockOrder), taking
// Pairs[i][1] while holding Pairs[i][0] is not checked.
type Exemption struct {
	Name  string
	Pairs [][2]Class
}

// Allows reports whether e exempts taking c while holding held.
func (e Exemption) Allows(held, c Class) bool {
	for _, p := range e.Pairs {
		if p == [2]Class{held, c} {
			return true
		}
	}
	return false
}

// Seed000After is what seed 000's design (uprobes.After: posted patches
// the kernel has not merged, and the model's reading of them) does against
// Order: register_for_each_vma waits for the mms it found busy one after
// another, in mm order, keeping each one's mmap lock (same class, ordered
// by mm, not by subclass: lockdep would need mm_take_all_locks' nest_lock
// form), and its next pass then takes dup_mmap_sem for write, sleeping
// (percpu_down_write, whose rcu_sync_enter may wait for a grace period),
// with them held. Order has the kernel's dup_mmap_sem < mmap_lock; the
// design takes an mmap lock under dup_mmap_sem only by trylock (register's
// and fork's mmap_write_trylock), which is its argument that it cannot
// deadlock.
var Seed000After = Exemption{
	Name:  "seed 000 after: busy mms' mmap_lock held across dup_mmap_sem (W)",
	Pairs: [][2]Class{{MmapLock, MmapLock}, {MmapLock, DupMmapSem}, {MmapLock, RCUGPMutex}},
}
