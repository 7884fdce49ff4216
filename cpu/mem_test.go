package cpu

import (
	"encoding/binary"
	"maps"
	"testing"

	"mmlab/errno"
)

// fakePage is a Page over a plain array.
type fakePage struct{ b [PageSize]byte }

func (p *fakePage) Bytes() []byte { return p.b[:] }

// prot bits of a fake mapping.
type prot uint8

const (
	pR prot = 1 << iota
	pW
	pX
)

// fakeMem is a Memory of whole pages with protections, copy-on-write and
// counters, for tests.
type fakeMem struct {
	pages     map[uint64]*fakePage // by virtual page number
	prot      map[uint64]prot
	cow       map[uint64]bool // the next Write access copies the page
	calls     [3]int          // Page calls by Access
	copies    int             // COW copies made
	denyWrite bool            // every Write access fails with SIGSEGV
	err       error           // if set, every access to a missing page fails with it (else SIGSEGV)
}

func newMem() *fakeMem {
	return &fakeMem{pages: map[uint64]*fakePage{}, prot: map[uint64]prot{}, cow: map[uint64]bool{}}
}

func (m *fakeMem) Page(addr uint64, acc Access) (Page, error) {
	m.calls[acc]++
	vpn := addr >> PageShift
	p, ok := m.pages[vpn]
	if !ok {
		if m.err != nil {
			return nil, m.err
		}
		return nil, errno.SIGSEGV
	}
	need := pR
	switch acc {
	case Exec:
		need = pX
	case Write:
		need = pW
	}
	if m.prot[vpn]&need == 0 || acc == Write && m.denyWrite {
		return nil, errno.SIGSEGV
	}
	if acc == Write && m.cow[vpn] {
		np := *p
		p = &np
		m.pages[vpn] = p
		delete(m.cow, vpn)
		m.copies++
	}
	return p, nil
}

// mmap maps n fresh pages at addr (page-aligned) with protection pr.
func (m *fakeMem) mmap(addr uint64, n int, pr prot) {
	for i := range n {
		vpn := addr>>PageShift + uint64(i)
		m.pages[vpn] = new(fakePage)
		m.prot[vpn] = pr
	}
}

// poke writes b at addr, into whatever pages are mapped there now.
func (m *fakeMem) poke(addr uint64, b []byte) {
	for i, x := range b {
		a := addr + uint64(i)
		m.pages[a>>PageShift].b[a%PageSize] = x
	}
}

func (m *fakeMem) peek(addr uint64, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		a := addr + uint64(i)
		out[i] = m.pages[a>>PageShift].b[a%PageSize]
	}
	return out
}

func (m *fakeMem) read64(addr uint64) uint64 { return binary.LittleEndian.Uint64(m.peek(addr, 8)) }

func (m *fakeMem) write64(addr, v uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	m.poke(addr, b[:])
}

// clone copies the whole address space (every page).
func (m *fakeMem) clone() *fakeMem {
	n := newMem()
	for vpn, p := range m.pages {
		c := *p
		n.pages[vpn] = &c
	}
	n.prot = maps.Clone(m.prot)
	n.cow = maps.Clone(m.cow)
	return n
}

// Addresses of the test address space: text r-x, a stack rw-, and an XOL
// page --x at the kernel's hint (TASK_SIZE - PAGE_SIZE).
const (
	textBase  = 0x401000
	stackBase = 0x7ffffffde000
	stackTop  = stackBase + 4*PageSize
	xolBase   = 0x7fffffffe000
)

// newTask returns an address space with code at textBase and registers ready
// to run it with an empty stack.
func newTask(t testing.TB, code []byte) (*fakeMem, *Regs) {
	t.Helper()
	m := newMem()
	m.mmap(textBase, 2, pR|pX)
	m.mmap(stackBase, 4, pR|pW)
	m.mmap(xolBase, 1, pX)
	m.poke(textBase, code)
	return m, &Regs{RIP: textBase, R: [16]uint64{RSP: stackTop}}
}

func asm(t testing.TB, build func(a *Asm)) []byte {
	t.Helper()
	a := NewAsm(textBase)
	build(a)
	code, err := a.Assemble()
	if err != nil {
		t.Fatal(err)
	}
	return code
}
