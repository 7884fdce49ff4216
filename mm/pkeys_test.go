package mm

import (
	"testing"

	"mmlab/errno"
	"mmlab/machine"
)

var (
	noPKU   = machine.MustNamed("x86-64").Features
	withPKU = machine.MustNamed("x86-64-pku").Features
)

// thread is a calling thread with its own PKRU (a locking.Waiter and a
// PKRUHolder), as kernel.Task is.
type thread struct{ pkru PKRU }

func (t *thread) Fatal() <-chan struct{} { return nil }
func (t *thread) CPU() int               { return -1 }
func (t *thread) PKRU() *PKRU            { return &t.pkru }

func pkuErr(pkey int) error {
	return errno.SigInfo{Signo: errno.SIGSEGV, Code: errno.SEGV_PKUERR, Pkey: pkey}
}

// vmaAt returns the VMA at page of the arena.
func vmaAt(t *testing.T, m *MM, page uint64) *VMA {
	t.Helper()
	v := m.VMALookup(arena + page*pg)
	if v == nil {
		t.Fatalf("no VMA at page %d: %s", page, layout(m))
	}
	return v
}

// A PROT_EXEC-only mmap is execute-only on an OSPKE machine (do_mmap() ->
// execute_only_pkey()): key 1, the first after the implicit key 0; data
// reads and writes raise SEGV_PKUERR with si_pkey, whether or not the page
// is present; fetches work. Without OSPKE the VMA has key 0 and reads like
// r-x.
func TestExecOnlyMmap(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		f         machine.Features
		pkey      int
		read      error
		write     error
		copyFrom  error
		execOnly  int // MM.ExecuteOnlyPkey
		allocated uint16
	}{
		{"pku", withPKU, 1, pkuErr(1), pkuErr(1), errno.EFAULT, 1, 0b11},
		{"nopku", noPKU, 0, nil, errAccErr, nil, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := New(new(Namespace), c.f)
			mmapAnon(t, m, 0, 2, PROT_EXEC)
			v := vmaAt(t, m, 0)
			if v.Flags.Pkey() != c.pkey || v.Flags&VM_ACCESS_FLAGS != VM_EXEC {
				t.Fatalf("VMA flags %#x: pkey %d, want %d", uint64(v.Flags), v.Flags.Pkey(), c.pkey)
			}
			if k := m.ExecuteOnlyPkey(); k != c.execOnly || m.pkeyAllocationMap != c.allocated {
				t.Errorf("execute_only_pkey %d, allocation map %#b; want %d, %#b", k, m.pkeyAllocationMap, c.execOnly, c.allocated)
			}
			if _, err := m.LoadByte(nil, arena); err != c.read {
				t.Errorf("read of an absent page: %v, want %v", err, c.read)
			}
			if _, err := m.FetchByte(nil, arena+pg); err != nil {
				t.Errorf("fetch: %v", err)
			}
			if _, err := m.LoadByte(nil, arena+pg); err != c.read { // present now
				t.Errorf("read of a present page: %v, want %v", err, c.read)
			}
			if err := m.StoreByte(nil, arena, 1); err != c.write {
				t.Errorf("write: %v, want %v", err, c.write)
			}
			if _, err := m.CopyFromUser(nil, arena, 1); err != c.copyFrom {
				t.Errorf("copy_from_user: %v, want %v", err, c.copyFrom)
			}
			if _, err := m.ReadRemote(nil, arena); err != nil {
				t.Errorf("remote read (FOLL_REMOTE ignores keys): %v", err)
			}
			// A second PROT_EXEC mapping reuses the key; adjacent
			// execute-only VMAs merge, since the key is in vm_flags.
			mmapAnon(t, m, 2, 1, PROT_EXEC)
			if got := layout(m); got != "0-3 --xp" {
				t.Errorf("layout %s, want one merged --x VMA", got)
			}
		})
	}
}

// mprotect follows __arch_override_mprotect_pkey(): into PROT_EXEC takes
// the execute-only key, out of it back to key 0, so the two halves of a
// split VMA differ in key and merge again when both leave execute-only.
func TestExecOnlyMprotect(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		f    machine.Features
		mid  string // after the middle page becomes --x
		key  int
	}{
		{"pku", withPKU, "0-1 r-xp, 1-2 --xp, 2-3 r-xp", 1},
		{"nopku", noPKU, "0-1 r-xp, 1-2 --xp, 2-3 r-xp", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := New(new(Namespace), c.f)
			mmapAnon(t, m, 0, 3, PROT_READ|PROT_EXEC)
			must(t, m.Mprotect(nil, arena+pg, pg, PROT_EXEC))
			if got := layout(m); got != c.mid {
				t.Fatalf("layout %s, want %s", got, c.mid)
			}
			if k := vmaAt(t, m, 1).Flags.Pkey(); k != c.key {
				t.Errorf("--x page key %d, want %d", k, c.key)
			}
			must(t, m.Mprotect(nil, arena+pg, pg, PROT_EXEC)) // stays execute-only
			if k := vmaAt(t, m, 1).Flags.Pkey(); k != c.key {
				t.Errorf("--x again: key %d, want %d", k, c.key)
			}
			must(t, m.Mprotect(nil, arena+pg, pg, PROT_READ|PROT_EXEC))
			if got := layout(m); got != "0-3 r-xp" {
				t.Errorf("layout %s after leaving execute-only, want one r-x VMA (key 0 again)", got)
			}
			if _, err := m.LoadByte(nil, arena+pg); err != nil {
				t.Errorf("read after leaving execute-only: %v", err)
			}
		})
	}
}

// With every key taken (pkey_alloc), a PROT_EXEC mapping keeps key 0 and
// stays readable. pkey_alloc itself is ENOSPC then, and EINVAL without
// OSPKE (arch_set_user_pkey_access() refuses the one key, 0).
func TestExecOnlyNoFreeKey(t *testing.T) {
	t.Parallel()
	m := New(new(Namespace), withPKU)
	for want := 1; want < 16; want++ {
		k, err := m.PkeyAlloc(nil, 0)
		if err != nil || k != want {
			t.Fatalf("pkey_alloc: %d %v, want %d", k, err, want)
		}
	}
	if _, err := m.PkeyAlloc(nil, 0); err != errno.ENOSPC {
		t.Fatalf("pkey_alloc with every key taken: %v, want ENOSPC", err)
	}
	mmapAnon(t, m, 0, 1, PROT_EXEC)
	if k := vmaAt(t, m, 0).Flags.Pkey(); k != 0 {
		t.Errorf("key %d, want 0", k)
	}
	if _, err := m.LoadByte(nil, arena); err != nil {
		t.Errorf("read: %v, want readable", err)
	}
	if _, err := New(new(Namespace), noPKU).PkeyAlloc(nil, 0); err != errno.EINVAL {
		t.Errorf("pkey_alloc without OSPKE: %v, want EINVAL", err)
	}
}

// PKRU is per thread: the execute-only key is denied through the calling
// thread's PKRU, which execute_only_pkey() sets when it allows the key,
// and through the default PKRU of any other thread.
func TestExecOnlyPKRUPerThread(t *testing.T) {
	t.Parallel()
	m := New(new(Namespace), withPKU)
	open := &thread{pkru: 0} // a thread that allowed every key (WRPKRU 0)
	other := &thread{pkru: InitPKRU}
	mmapAnon(t, m, 0, 1, PROT_READ|PROT_WRITE)
	must(t, m.StoreByte(nil, arena, 7))
	must(t, m.Mprotect(open, arena, pg, PROT_EXEC))
	if open.pkru.AllowsRead(1) || open.pkru != PKRU_AD_BIT<<2 {
		t.Errorf("caller's PKRU %#x, want access-disable for key 1 only", uint32(open.pkru))
	}
	if other.pkru != InitPKRU {
		t.Errorf("another thread's PKRU changed: %#x", uint32(other.pkru))
	}
	if _, err := m.LoadByte(other, arena); err != pkuErr(1) {
		t.Errorf("other thread's read: %v", err)
	}
	open.pkru = 0 // the thread allows key 1 again: it may read
	if v, err := m.LoadByte(open, arena); err != nil || v != 7 {
		t.Errorf("read with key 1 allowed: %d %v", v, err)
	}
	// A key that exists and is already denied is left alone.
	denied := &thread{pkru: InitPKRU | PKRU_WD_BIT<<2}
	mmapAnon(t, m, 1, 1, PROT_EXEC)
	if denied.pkru != InitPKRU|PKRU_WD_BIT<<2 {
		t.Errorf("PKRU of a thread that denies the key rewritten: %#x", uint32(denied.pkru))
	}
}

// fork copies the VMAs' keys and the mm's key state (arch_dup_pkeys): the
// child's execute-only VMA stays execute-only, and its next PROT_EXEC
// mapping reuses the same key.
func TestExecOnlyFork(t *testing.T) {
	t.Parallel()
	m := New(new(Namespace), withPKU)
	mmapAnon(t, m, 0, 1, PROT_EXEC)
	c, err := m.Fork(nil)
	must(t, err)
	defer c.Exit()
	if _, err := c.LoadByte(nil, arena); err != pkuErr(1) {
		t.Errorf("child's read: %v", err)
	}
	mmapAnon(t, c, 2, 1, PROT_EXEC)
	if k := vmaAt(t, c, 2).Flags.Pkey(); k != 1 || c.pkeyAllocationMap != 0b11 {
		t.Errorf("child's new execute-only VMA key %d, map %#b", k, c.pkeyAllocationMap)
	}
}

// An instruction fetch faults the page in before the NX bit stops it
// (access_error() does not look at VM_EXEC): past a file's end that is
// SIGBUS, elsewhere SEGV_ACCERR; PROT_NONE refuses it at once.
func TestFetchFaultsInFirst(t *testing.T) {
	t.Parallel()
	m := New(new(Namespace), noPKU)
	f := Open(NewInode(new(Namespace), "f", 100, func(uint64) byte { return 1 }))
	_, err := m.Mmap(nil, arena, 2*pg, PROT_READ, MAP_PRIVATE|MAP_FIXED, f, 0)
	must(t, err)
	if _, err := m.FetchByte(nil, arena); err != errAccErr {
		t.Errorf("fetch from r--: %v, want SEGV_ACCERR", err)
	}
	if _, err := m.FetchByte(nil, arena+pg); err != errBusAdr {
		t.Errorf("fetch from r-- past EOF: %v, want SIGBUS", err)
	}
	mmapAnon(t, m, 4, 1, PROT_NONE)
	if _, err := m.FetchByte(nil, arena+4*pg); err != errAccErr {
		t.Errorf("fetch from ---: %v, want SEGV_ACCERR", err)
	}
	if _, err := m.FetchByte(nil, arena+8*pg); err != errMapErr {
		t.Errorf("fetch from nothing: %v, want SEGV_MAPERR", err)
	}
}
