package mm

import (
	"mmlab/errno"
	"mmlab/locking"
)

// Protection keys as x86 Linux implements them (arch/x86/mm/pkeys.c,
// arch/x86/include/asm/pkeys.h, pkru.h, mmu_context.h). A VMA's key is in
// its vm_flags (VM_PKEY_BIT0..3), so splits, merges and fork carry it; the
// mm allocates keys (mm_context_t); each thread's PKRU register says which
// keys its data accesses may use. Instruction fetches never check keys. On
// a machine without OSPKE every VMA has key 0 and nothing here applies.

// Protection-key vm_flags (include/linux/mm.h: VM_PKEY_SHIFT is
// VMA_HIGH_ARCH_0_BIT; x86 has four key bits).
const (
	VM_PKEY_SHIFT              = 32
	VM_PKEY_BIT0       VMFlags = 1 << (VM_PKEY_SHIFT + 0)
	VM_PKEY_BIT1       VMFlags = 1 << (VM_PKEY_SHIFT + 1)
	VM_PKEY_BIT2       VMFlags = 1 << (VM_PKEY_SHIFT + 2)
	VM_PKEY_BIT3       VMFlags = 1 << (VM_PKEY_SHIFT + 3)
	ARCH_VM_PKEY_FLAGS         = VM_PKEY_BIT0 | VM_PKEY_BIT1 | VM_PKEY_BIT2 | VM_PKEY_BIT3
)

// Pkey mirrors arch/x86/include/asm/pkeys.h:vma_pkey(): the protection key
// in f.
func (f VMFlags) Pkey() int { return int((f & ARCH_VM_PKEY_FLAGS) >> VM_PKEY_SHIFT) }

// pkeyFlags mirrors x86's arch_calc_vm_prot_bits(prot, key): key's bits in
// vm_flags.
func pkeyFlags(pkey int) VMFlags { return VMFlags(pkey) << VM_PKEY_SHIFT & ARCH_VM_PKEY_FLAGS }

// PKRU is a thread's x86 PKRU register: for each key two bits, AD
// (access-disable) and WD (write-disable). It is per thread: a clone copies
// it, execve() resets it to InitPKRU.
type PKRU uint32

// The PKRU bits of a key and pkey_alloc()'s access rights
// (arch/x86/include/asm/pkru.h, include/uapi/linux/mman.h).
const (
	PKRU_AD_BIT         = 0x1
	PKRU_WD_BIT         = 0x2
	PKRU_BITS_PER_PKEY  = 2
	PKEY_DISABLE_ACCESS = 0x1
	PKEY_DISABLE_WRITE  = 0x2
)

// InitPKRU is arch/x86/mm/pkeys.c:init_pkru_value, every key but 0
// access-disabled: the PKRU of a thread after execve(), and so of the
// model's new tasks.
const InitPKRU PKRU = 0x55555554

// AllowsRead mirrors __pkru_allows_read().
func (p PKRU) AllowsRead(pkey int) bool {
	return p&(PKRU_AD_BIT<<(pkey*PKRU_BITS_PER_PKEY)) == 0
}

// AllowsWrite mirrors __pkru_allows_write(): neither AD nor WD.
func (p PKRU) AllowsWrite(pkey int) bool {
	return p&((PKRU_AD_BIT|PKRU_WD_BIT)<<(pkey*PKRU_BITS_PER_PKEY)) == 0
}

// allowsPkey mirrors __pkru_allows_pkey().
func (p PKRU) allowsPkey(pkey int, write bool) bool {
	return p.AllowsRead(pkey) && (!write || p.AllowsWrite(pkey))
}

// A PKRUHolder is a thread with a PKRU register: kernel.Task and
// kernel.Runner. An operation's Waiter is its calling thread, the kernel's
// current; when it is a PKRUHolder the operation reads and writes that
// thread's PKRU, as the kernel reads and writes current's. Any other caller
// (nil: the trace replay, tests) is a thread whose PKRU is InitPKRU; a write
// to it is lost, which changes nothing the model can observe, as the only
// write the mm makes (execute_only_pkey) sets an access-disable bit that
// InitPKRU already has. Model choice: the kernel finds current without
// being told; the model learns it from the Waiter it is given.
type PKRUHolder interface {
	PKRU() *PKRU
}

// pkruValue returns the PKRU of the calling thread w, InitPKRU for a caller
// that has none. It does not allocate.
func pkruValue(w locking.Waiter) PKRU {
	if h, ok := w.(PKRUHolder); ok {
		if p := h.PKRU(); p != nil {
			return *p
		}
	}
	return InitPKRU
}

// pkruOf returns the PKRU of the calling thread w, to be written, or a fresh
// InitPKRU.
func pkruOf(w locking.Waiter) *PKRU {
	if h, ok := w.(PKRUHolder); ok {
		if p := h.PKRU(); p != nil {
			return p
		}
	}
	p := InitPKRU
	return &p
}

// maxPkey mirrors arch_max_pkey(): 16 keys with OSPKE, only key 0 without.
func (m *MM) maxPkey() int {
	if m.feat.OSPKE {
		return 16
	}
	return 1
}

// mmPkeyAlloc mirrors arch/x86/include/asm/pkeys.h:mm_pkey_alloc(): the
// lowest free key, or -1. Caller holds MmapLock for write.
func (m *MM) mmPkeyAlloc() int {
	all := uint16(1)<<m.maxPkey() - 1
	if m.pkeyAllocationMap == all {
		return -1
	}
	for k := range m.maxPkey() {
		if m.pkeyAllocationMap&(1<<k) == 0 {
			m.pkeyAllocationMap |= 1 << k
			return k
		}
	}
	return -1
}

// setUserPkeyAccess mirrors arch/x86/kernel/fpu/xstate.c:
// arch_set_user_pkey_access(): key's bits of the thread's PKRU become
// initVal's (EINVAL without OSPKE).
func (m *MM) setUserPkeyAccess(pkru *PKRU, pkey, initVal int) error {
	if !m.feat.OSPKE || pkey >= m.maxPkey() {
		return errno.EINVAL
	}
	var bits PKRU
	if initVal&PKEY_DISABLE_ACCESS != 0 {
		bits |= PKRU_AD_BIT
	}
	if initVal&PKEY_DISABLE_WRITE != 0 {
		bits |= PKRU_WD_BIT
	}
	shift := pkey * PKRU_BITS_PER_PKEY
	*pkru = *pkru&^((PKRU_AD_BIT|PKRU_WD_BIT)<<shift) | bits<<shift
	return nil
}

// PkeyAlloc mirrors mm/mprotect.c:pkey_alloc(2) with flags 0: allocate a
// key and give the calling thread w the access rights initVal to it.
// ENOSPC when every key is taken; EINVAL without OSPKE (the one key, 0,
// is handed to arch_set_user_pkey_access(), which refuses), and for
// rights other than PKEY_DISABLE_ACCESS and PKEY_DISABLE_WRITE.
func (m *MM) PkeyAlloc(w locking.Waiter, initVal int) (int, error) {
	if initVal&^(PKEY_DISABLE_ACCESS|PKEY_DISABLE_WRITE) != 0 {
		return 0, errno.EINVAL
	}
	m.MmapWriteLock(w)
	defer m.MmapWriteUnlock()
	pkey := m.mmPkeyAlloc()
	if pkey < 0 {
		return 0, errno.ENOSPC
	}
	if err := m.setUserPkeyAccess(pkruOf(w), pkey, initVal); err != nil {
		m.pkeyAllocationMap &^= 1 << pkey
		return 0, err
	}
	return pkey, nil
}

// ExecuteOnlyPkey returns the mm's execute-only key (mm_context_t's
// execute_only_pkey), -1 before one was allocated.
func (m *MM) ExecuteOnlyPkey() int {
	m.MmapReadLock(nil)
	defer m.MmapReadUnlock()
	return m.execOnlyPkey
}

// executeOnlyPkey mirrors arch/x86/mm/pkeys.c:__execute_only_pkey(): the
// mm's execute-only key, allocated at its first use, with the calling
// thread's PKRU set to deny data access to it; -1 when no key is free (and
// always without OSPKE: execute_only_pkey() returns -1 there). Caller holds
// MmapLock for write.
func (m *MM) executeOnlyPkey(pkru *PKRU) int {
	if !m.feat.OSPKE {
		return -1
	}
	pkey := m.execOnlyPkey
	need := false
	if pkey == -1 {
		if pkey = m.mmPkeyAlloc(); pkey < 0 {
			return -1
		}
		need = true
	}
	if !need && !pkru.AllowsRead(pkey) {
		return pkey
	}
	if err := m.setUserPkeyAccess(pkru, pkey, PKEY_DISABLE_ACCESS); err != nil {
		m.pkeyAllocationMap &^= 1 << pkey
		return -1
	}
	if need {
		m.execOnlyPkey = pkey
	}
	return pkey
}

// overrideMprotectPkey mirrors arch/x86/mm/pkeys.c:
// __arch_override_mprotect_pkey() for a plain mprotect() (pkey -1): a
// PROT_EXEC-only protection takes the execute-only key if one can be had; a
// VMA leaving execute-only goes back to key 0; otherwise the VMA keeps its
// key. Without OSPKE arch_override_mprotect_pkey() is 0.
func (m *MM) overrideMprotectPkey(v *VMA, prot int, pkru *PKRU) int {
	if !m.feat.OSPKE {
		return 0
	}
	if prot == PROT_EXEC {
		if pkey := m.executeOnlyPkey(pkru); pkey > 0 {
			return pkey
		}
	} else if v.Flags&VM_ACCESS_FLAGS == VM_EXEC && v.Flags.Pkey() == m.execOnlyPkey { // vma_is_pkey_exec_only
		return 0 // ARCH_DEFAULT_PKEY
	}
	return v.Flags.Pkey()
}

// VMAAccessPermitted mirrors arch/x86/include/asm/mmu_context.h:
// arch_vma_access_permitted(): instruction fetches and foreign accesses
// (FOLL_REMOTE: /proc/PID/mem, process_vm_readv, ptrace, uprobes' breakpoint
// writes) never check keys; any other data access, the kernel's own on the
// thread's behalf (copy_from_user, local GUP) included, needs the thread's
// PKRU to allow v's key. Without OSPKE every VMA has key 0, which InitPKRU
// allows.
func (m *MM) VMAAccessPermitted(v *VMA, write, exec, foreign bool, pkru PKRU) bool {
	if exec || foreign || !m.feat.OSPKE {
		return true
	}
	return pkru.allowsPkey(v.Flags.Pkey(), write)
}
