package kernel

import (
	"errors"
	"testing"

	"mmlab/design"
	"mmlab/locking"
	"mmlab/machine"
	"mmlab/mm"
)

// TestForkCopiesAddressSpace: the child of a fork sees the parent's private
// memory copy-on-write (its store is invisible to the parent), a thread
// shares the address space, and the last ExitMM tears it down.
func TestForkCopiesAddressSpace(t *testing.T) {
	t.Parallel()
	var ns Namespace
	const addr = 0x100000000000
	p := NewTaskMM(&ns, "p", machine.MustNamed("x86-64").Features)
	if _, err := p.MM.Mmap(p, addr, 4096, mm.PROT_READ|mm.PROT_WRITE, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED, nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := p.MM.StoreByte(p, addr, 7); err != nil {
		t.Fatal(err)
	}
	c, err := p.Fork()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MM.StoreByte(c, addr, 9); err != nil {
		t.Fatal(err)
	}
	if v, _ := p.MM.LoadByte(p, addr); v != 7 {
		t.Errorf("parent reads %d after the child's store, want 7", v)
	}
	if v, _ := c.MM.LoadByte(c, addr); v != 9 {
		t.Errorf("child reads %d, want 9", v)
	}
	th := p.NewThread()
	if th.MM != p.MM || p.MM.Users.Load() != 2 {
		t.Fatalf("thread does not share the mm (users %d)", p.MM.Users.Load())
	}
	m := p.MM
	p.ExitMM()
	if len(m.VMAs()) != 1 {
		t.Fatal("mm torn down while a thread still uses it")
	}
	th.ExitMM()
	if len(m.VMAs()) != 0 || m.PT.Resident() != 0 {
		t.Errorf("after the last ExitMM: %d VMAs, %d resident pages", len(m.VMAs()), m.PT.Resident())
	}
	c.ExitMM()
}

// TestForkKilledParent: dup_mmap takes the parent's mmap lock killably, so a
// fork waiting behind a writer returns EINTR when the parent is killed.
func TestForkKilledParent(t *testing.T) {
	t.Parallel()
	var ns Namespace
	p := NewTaskMM(&ns, "p", machine.MustNamed("x86-64").Features)
	p.MM.MmapWriteLock(nil)
	done := make(chan error)
	go func() {
		_, err := p.Fork()
		done <- err
	}()
	p.Kill()
	err := <-done
	p.MM.MmapWriteUnlock()
	if err == nil {
		t.Fatal("fork of a killed parent succeeded")
	}
}

// A process of a kernel with uprobes needs seed 000's design: an unset one
// is refused, not taken for before.
func TestNewTaskMMWithRefusesUnsetDesign(t *testing.T) {
	t.Parallel()
	var sem locking.PercpuRWSem
	mach := NewMachine(machine.MustNamed("x86-64"), 1)
	defer mach.Stop()
	if _, err := mach.NewTaskMMWith("p", Config{DupMmapSem: &sem}); !errors.Is(err, design.ErrUnset) {
		t.Errorf("no design: %v, want design.ErrUnset", err)
	}
	p, err := mach.NewTaskMMWith("p", Config{Design: DesignAfter, DupMmapSem: &sem})
	if err != nil {
		t.Fatal(err)
	}
	defer p.ExitMM()
	c, err := p.Fork()
	if err != nil {
		t.Fatal(err)
	}
	defer c.ExitMM()
	if c.uprobes != p.uprobes {
		t.Error("the child is not of its parent's kernel")
	}
}
