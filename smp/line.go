package smp

import (
	"fmt"
	"maps"
	"math/bits"
	"sync/atomic"
	"time"
	"weak"

	"slices"

	"mmlab/machine"
	"mmlab/sched"
)

// Line is a cache line: the identity that words registered on it share,
// and in a sim run the unit that moves between CPUs. Its fields are
// written by InitOn before the words are shared, and by the sim run's
// running thread.
type Line struct {
	name  string
	words []string // the names of the words on it, by slot

	mem *memory // the sim run whose state idx indexes; nil: none yet
	idx int32
}

// NewLine returns a line named name ("mmap_lock") for words that share
// it (InitOn).
func NewLine(name string) *Line { return &Line{name: name} }

// Name returns the line's name.
func (l *Line) Name() string { return l.name }

// SetName names a line declared as a value. Call it before its words are
// shared.
func (l *Line) SetName(name string) { l.name = name }

// add registers a word named name on l and returns its slot.
func (l *Line) add(name string) uint8 {
	for i, w := range l.words {
		if w == name {
			return uint8(i)
		}
	}
	if len(l.words) == 255 {
		panic(fmt.Sprintf("smp: line %s: too many words", l.name))
	}
	l.words = append(l.words, name)
	return uint8(len(l.words) - 1)
}

// word is what every shared word carries besides its value: its line and
// its slot on it. Written by Init/InitOn before the word is shared, or by
// a sim run's running thread for a word never registered.
type word struct {
	line *Line
	slot uint8
}

func (w *word) init(name string) {
	w.line = &Line{name: name, words: []string{name}}
	w.slot = 0
}

func (w *word) initOn(l *Line, name string) {
	w.line = l
	w.slot = l.add(name)
}

// Kinds of access.
type kind uint8

const (
	kindLoad  kind = iota // READ_ONCE
	kindStore             // WRITE_ONCE
	kindRMW               // a locked read-modify-write
	nKinds
)

// Distance classes of a transfer, as machine.Costs names them, in the
// order of machine.Distances.
type Class uint8

const (
	ClassSMT    Class = iota // SMT siblings of one core
	ClassLLC                 // two cores sharing a last-level cache
	ClassSocket              // two cores of one socket, different LLCs
	ClassRemote              // two sockets
	NumClasses
)

func (c Class) String() string { return [...]string{"smt", "llc", "socket", "remote"}[c] }

// lineState is a line's coherence state and counts in one sim run. It
// keeps the line's names, not the line: a line sits in the object it
// belongs to (a child's mm), which the run must not keep alive after the
// object is gone.
type lineState struct {
	line    weak.Pointer[Line]
	name    string
	words   []string // the line's word names when an access last saw them
	owner   int      // the CPU holding it modified; -1: none
	sharers []uint64 // CPUs holding it shared (owner < 0), a bit set
	busy    int64    // virtual ns until which it is in flight

	ops       [][nKinds]int64 // accesses by word slot and kind
	moves     []int64         // transfers by the word slot whose access made them
	transfers [NumClasses]int64
	cost      int64 // ns of transfers
	wait      int64 // ns requesters queued behind the line in flight
	from, to  map[int]int64
}

// memory is one sim run's lines and CPUs.
type memory struct {
	sys    *sched.System
	desc   *machine.Description
	cpus   int
	place  []cpuPlace
	cost   [NumClasses]int64
	rmw    int64
	posted []int64 // per CPU: when its posted stores have all arrived
	lines  []*lineState
	// freed holds, by name, the summed counts of lines whose objects are
	// gone (compact), for the profile; compactAt is the length of lines
	// at which compact runs next.
	freed     map[string]*lineState
	compactAt int
}

// cpuPlace is where a CPU sits in the topology.
type cpuPlace struct{ socket, core, llc int }

// cur caches the memory of the last sim System an access came from.
var cur *memory

// memOf returns the memory of sim System s, made on its first access.
func memOf(s *sched.System) *memory {
	if cur != nil && cur.sys == s {
		return cur
	}
	m, _ := s.SimMemory().(*memory)
	if m == nil {
		m = newMemory(s)
		s.SetSimMemory(m)
	}
	cur = m
	return m
}

func newMemory(s *sched.System) *memory {
	n := s.NumCPU()
	m := &memory{sys: s, desc: s.SimMachine(), cpus: n, posted: make([]int64, n), place: make([]cpuPlace, n)}
	if d := m.desc; d != nil {
		t := d.Topology
		// A run of more CPUs than the topology has wraps around (a model
		// choice: CPU c sits where CPU c mod Topology.CPUs does, as an SMT
		// sibling of it).
		for c := range n {
			socket, core, _ := t.Place(c)
			m.place[c] = cpuPlace{socket: socket, core: core, llc: core / t.CoresPerLLC}
		}
		m.cost = [NumClasses]int64{ns(d.Costs.LineSMT), ns(d.Costs.LineLLC), ns(d.Costs.LineSocket), ns(d.Costs.LineRemote)}
		m.rmw = ns(d.Costs.LockedRMW)
	}
	return m
}

func ns(c machine.Cost) int64 { return int64(c.NS + 0.5) }

// class returns the distance class between two distinct CPUs.
func (m *memory) class(a, b int) Class {
	pa, pb := m.place[a], m.place[b]
	return Class(machine.DistanceIndex(pa.socket == pb.socket, pa.core == pb.core, pa.llc == pb.llc))
}

// state returns l's state in m, made on its first access in the run.
func (m *memory) state(l *Line) *lineState {
	if l.mem == m {
		return m.lines[l.idx]
	}
	if len(m.lines) >= m.compactAt {
		m.compact()
	}
	st := &lineState{line: weak.Make(l), name: l.name, words: l.words, owner: -1, sharers: make([]uint64, (m.cpus+63)/64)}
	l.mem, l.idx = m, int32(len(m.lines))
	m.lines = append(m.lines, st)
	return st
}

// compact drops the state of the lines that the garbage collector found
// unreachable (the objects they sat in are gone: a child's mm after its
// exit), adding their counts to freed by name, so that a run's memory
// follows its live lines, not every line it ever touched. It runs when
// the lines have doubled since the last time.
func (m *memory) compact() {
	live := m.lines[:0]
	for _, st := range m.lines {
		l := st.line.Value()
		if l != nil {
			l.idx = int32(len(live))
			live = append(live, st)
			continue
		}
		if m.freed == nil {
			m.freed = map[string]*lineState{}
		}
		f := m.freed[st.name]
		if f == nil {
			f = newSum(st.name)
			m.freed[st.name] = f
		}
		f.add(st)
	}
	clear(m.lines[len(live):])
	m.lines = live
	m.compactAt = max(4096, 2*len(live))
}

// newSum returns an empty state that sums the counts of lines named name.
func newSum(name string) *lineState {
	return &lineState{name: name, from: map[int]int64{}, to: map[int]int64{}}
}

// add adds o's counts to st's.
func (st *lineState) add(o *lineState) {
	for len(st.ops) < len(o.ops) {
		st.ops = append(st.ops, [nKinds]int64{})
		st.moves = append(st.moves, 0)
	}
	for i := range o.ops {
		for k := range o.ops[i] {
			st.ops[i][k] += o.ops[i][k]
		}
		st.moves[i] += o.moves[i]
	}
	if len(o.words) > len(st.words) {
		st.words = o.words
	}
	for c := range o.transfers {
		st.transfers[c] += o.transfers[c]
	}
	st.cost += o.cost
	st.wait += o.wait
	for k, v := range o.from {
		st.from[k] += v
	}
	for k, v := range o.to {
		st.to[k] += v
	}
}

// byName returns the run's line states summed by line name, in the order
// of first access, so that the profile does not depend on which freed
// lines the garbage collector has found so far (compact).
func (m *memory) byName() []*lineState {
	var order []string
	sums := map[string]*lineState{}
	add := func(st *lineState) {
		f := sums[st.name]
		if f == nil {
			f = newSum(st.name)
			sums[st.name] = f
			order = append(order, st.name)
		}
		f.add(st)
	}
	for _, st := range m.lines {
		add(st)
	}
	for _, name := range slices.Sorted(maps.Keys(m.freed)) {
		add(m.freed[name])
	}
	out := make([]*lineState, len(order))
	for i, name := range order {
		out[i] = sums[name]
	}
	return out
}

func (st *lineState) transfersTotal() (n int64) {
	for _, x := range st.transfers {
		n += x
	}
	return n
}

func (st *lineState) holds(c int) bool { return st.owner == c || st.sharers[c/64]&(1<<(c%64)) != 0 }

// access is an access of kind k to word w in the active sim run, by its
// running thread: it moves the line and stalls the thread for what the
// access costs.
func access(w *word, k kind) {
	s, c, now, ok := sched.SimCPU()
	if !ok {
		return
	}
	if w.line == nil {
		w.init("(unnamed)")
	}
	m := memOf(s)
	st := m.state(w.line)
	for int(w.slot) >= len(st.ops) {
		st.ops = append(st.ops, [nKinds]int64{})
		st.moves = append(st.moves, 0)
		st.words = w.line.words
	}
	st.ops[w.slot][k]++
	n := st.transfersTotal()
	d := m.move(st, c, now, k)
	if st.transfersTotal() != n {
		st.moves[w.slot]++
	}
	if d > 0 {
		sched.Stall(time.Duration(d))
	}
}

// move applies an access of kind k by CPU c at virtual time now to line
// st and returns how long c waits for it.
func (m *memory) move(st *lineState, c int, now int64, k kind) int64 {
	t0 := now
	if k == kindRMW {
		t0 = max(now, m.posted[c]) // a locked instruction drains the store buffer
	}
	src, hit := -1, st.holds(c)
	switch {
	case hit && (k == kindLoad || st.owner == c):
	case st.owner >= 0:
		src = st.owner
	case k != kindLoad:
		// Invalidate the other sharers; the farthest answers last.
		for i, word := range st.sharers {
			for word != 0 {
				b := i*64 + bits.TrailingZeros64(word)
				word &= word - 1
				if b != c && (src < 0 || m.class(c, b) > m.class(c, src)) {
					src = b
				}
			}
		}
	case k == kindLoad:
		for i, word := range st.sharers {
			for word != 0 {
				b := i*64 + bits.TrailingZeros64(word)
				word &= word - 1
				if src < 0 || m.class(c, b) < m.class(c, src) {
					src = b
				}
			}
		}
	}
	end := t0
	if src >= 0 {
		cl := m.class(c, src)
		start := max(t0, st.busy)
		end = start + m.cost[cl]
		st.transfers[cl]++
		st.cost += m.cost[cl]
		st.wait += start - t0
		if st.from == nil {
			st.from, st.to = map[int]int64{}, map[int]int64{}
		}
		st.from[src]++
		st.to[c]++
		st.busy = end
	} else if k == kindRMW {
		end = max(t0, st.busy) + m.rmw
		st.busy = end
	}
	// The new coherence state.
	switch {
	case k == kindLoad && !hit:
		if st.owner >= 0 {
			st.sharers[st.owner/64] |= 1 << (st.owner % 64)
			st.owner = -1
		}
		st.sharers[c/64] |= 1 << (c % 64)
	case k != kindLoad:
		clear(st.sharers)
		st.owner = c
	}
	if k == kindStore {
		m.posted[c] = max(m.posted[c], end)
		return 0
	}
	return end - now
}

// Mb is smp_mb(), a full barrier: on x86 a locked add to the stack, which
// drains the store buffer. In a sim run the running thread waits for its
// posted stores and pays machine.Costs.LockedRMW.
func Mb() {
	if atomic.LoadUint32(&sched.SimRunning) != 0 {
		mb()
	}
}

func mb() {
	s, c, now, ok := sched.SimCPU()
	if !ok {
		return
	}
	m := memOf(s)
	if d := max(now, m.posted[c]) + m.rmw - now; d > 0 {
		sched.Stall(time.Duration(d))
	}
}
