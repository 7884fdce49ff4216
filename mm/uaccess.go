package mm

import (
	"mmlab/errno"
	"mmlab/locking"
	"mmlab/mm/pgtable"
)

// The three kinds of access to user memory, which differ in what checks
// them (arch_vma_access_permitted(), mm/gup.c:check_vma_flags()):
//
//   - user mode (LoadByte, StoreByte, FetchByte, and the model CPU's
//     accesses through kernel.Runner.Page): the VMA's protection and, for
//     data, the thread's PKRU; a fault is a signal;
//   - the kernel's own on the thread's behalf (CopyFromUser; get_user and
//     put_user, the model CPU's Load64 and Store64; local GUP such as
//     is_trap_at_addr()'s): the same checks, protection keys included, but
//     a fault is EFAULT;
//   - remote (FOLL_REMOTE: /proc/PID/mem, process_vm_readv, ptrace, and
//     uprobe_write_opcode(), UprobeWrite): no protection-key check, and
//     FOLL_FORCE reads through a VMA without VM_READ that has VM_MAYREAD.

// FetchByte is a user-mode instruction fetch of the byte at addr by thread
// w: the page is faulted in as for a read (AccessError), then the VMA must
// be executable (NXError); protection keys never apply.
func (m *MM) FetchByte(w locking.Waiter, addr uint64) (byte, error) {
	v, vmaLocked, err := m.lockForAccess(w, addr, X86_PF_INSTR)
	if err != nil {
		return 0, err
	}
	defer m.unlockAccess(v, vmaLocked)
	b, err := m.pageByte(v, addr)
	if err == nil {
		err = NXError(v)
	}
	return b, err
}

// pageByte returns the byte at addr of v, faulting its page in for a read.
// Caller holds v's lock or the mmap lock.
func (m *MM) pageByte(v *VMA, addr uint64) (byte, error) {
	pte, ok := m.PT.Lookup(addr)
	if !ok {
		if err := m.handleFault(v, addr, false); err != nil {
			return 0, err
		}
		pte, _ = m.PT.Lookup(addr)
	}
	return pte.Page.ByteAt(int(addr & (pgtable.PageSize - 1))), nil
}

// CopyFromUser mirrors copy_from_user() of n bytes at addr in the kernel on
// behalf of thread w (write(2)'s read of its buffer): each byte is a data
// read that the VMA and w's PKRU must allow, as a user read must
// (do_user_addr_fault() checks keys for kernel-mode faults too, and the
// hardware checks them on present pages); a fault is fixed up to EFAULT
// (kernelmode_fixup_or_oops()). It returns the bytes copied before the
// fault, and EFAULT when it stopped short.
func (m *MM) CopyFromUser(w locking.Waiter, addr uint64, n int) ([]byte, error) {
	out := make([]byte, 0, n)
	for i := range uint64(n) {
		b, err := m.LoadByte(w, addr+i)
		if err != nil {
			return out, errno.EFAULT
		}
		out = append(out, b)
	}
	return out, nil
}

// ReadRemote mirrors a one-byte access_remote_vm() read with FOLL_FORCE
// (/proc/PID/mem, as a debugger reads it): check_vma_flags() lets it read a
// VMA without VM_READ that has VM_MAYREAD, and a foreign access never
// checks protection keys. It faults the page in as a read fault. EIO, as
// mem_rw() answers, when no byte could be read.
func (m *MM) ReadRemote(w locking.Waiter, addr uint64) (byte, error) {
	m.MmapReadLock(w)
	defer m.MmapReadUnlock()
	v := m.mt.Load(addr)
	if v == nil || v.Flags&(VM_IO|VM_PFNMAP) != 0 || v.Flags&(VM_READ|VM_MAYREAD) == 0 {
		return 0, errno.EIO
	}
	b, err := m.pageByte(v, addr)
	if err != nil {
		return 0, errno.EIO
	}
	return b, nil
}
