package mm

import "strings"

// VMFlags are vm_area_struct.vm_flags, with the kernel's bit values
// (include/linux/mm.h, x86-64).
type VMFlags uint64

// VMA flag bits.
const (
	VM_READ        VMFlags = 1 << 0
	VM_WRITE       VMFlags = 1 << 1
	VM_EXEC        VMFlags = 1 << 2
	VM_SHARED      VMFlags = 1 << 3
	VM_MAYREAD     VMFlags = 1 << 4
	VM_MAYWRITE    VMFlags = 1 << 5
	VM_MAYEXEC     VMFlags = 1 << 6
	VM_MAYSHARE    VMFlags = 1 << 7
	VM_GROWSDOWN   VMFlags = 1 << 8
	VM_PFNMAP      VMFlags = 1 << 10
	VM_MAYBE_GUARD VMFlags = 1 << 11
	VM_LOCKED      VMFlags = 1 << 13
	VM_IO          VMFlags = 1 << 14
	VM_DONTCOPY    VMFlags = 1 << 17
	VM_DONTEXPAND  VMFlags = 1 << 18
	VM_ACCOUNT     VMFlags = 1 << 20
	VM_NORESERVE   VMFlags = 1 << 21
	VM_HUGETLB     VMFlags = 1 << 22
	VM_WIPEONFORK  VMFlags = 1 << 25
	VM_SOFTDIRTY   VMFlags = 1 << 27
	VM_MIXEDMAP    VMFlags = 1 << 28

	// VM_ACCESS_FLAGS are the bits mprotect changes.
	VM_ACCESS_FLAGS = VM_READ | VM_WRITE | VM_EXEC
	// VM_SPECIAL mappings never merge.
	VM_SPECIAL = VM_IO | VM_DONTEXPAND | VM_PFNMAP | VM_MIXEDMAP
	// VM_IGNORE_MERGE are the sticky bits merging ignores.
	VM_IGNORE_MERGE = VM_SOFTDIRTY | VM_MAYBE_GUARD
)

// String gives the rwxp/rwxs column of /proc/PID/maps.
func (f VMFlags) String() string {
	var b strings.Builder
	b.WriteByte(pick(f&VM_READ != 0, 'r', '-'))
	b.WriteByte(pick(f&VM_WRITE != 0, 'w', '-'))
	b.WriteByte(pick(f&VM_EXEC != 0, 'x', '-'))
	b.WriteByte(pick(f&VM_MAYSHARE != 0, 's', 'p'))
	return b.String()
}

func pick(c bool, a, b byte) byte {
	if c {
		return a
	}
	return b
}

// mmap(2) prot and flags, Linux values.
const (
	PROT_NONE  = 0x0
	PROT_READ  = 0x1
	PROT_WRITE = 0x2
	PROT_EXEC  = 0x4

	MAP_SHARED          = 0x01
	MAP_PRIVATE         = 0x02
	MAP_TYPE            = 0x0f
	MAP_FIXED           = 0x10
	MAP_ANONYMOUS       = 0x20
	MAP_POPULATE        = 0x8000
	MAP_FIXED_NOREPLACE = 0x100000

	MREMAP_MAYMOVE   = 1
	MREMAP_FIXED     = 2
	MREMAP_DONTUNMAP = 4
)

// calcVMProtBits mirrors include/linux/mman.h:calc_vm_prot_bits(): prot's
// access bits and, through x86's arch_calc_vm_prot_bits(), pkey's bits.
func calcVMProtBits(prot, pkey int) VMFlags {
	return VMFlags(prot)&VM_ACCESS_FLAGS | pkeyFlags(pkey)
}
