package calibrate

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
)

// forkHelperCode is the x86-64 code of the fork helper (ForkHelperELF),
// as GNU as assembles it (objdump -d -M intel of the bytes shows the
// listing below). It keeps the number of pages in r12, the forks left in
// r13 and the sum of the forks' times in r14; t0 and t1, two struct
// timespec, are on the stack.
//
// An error of mmap, fork, wait4 or write exits with status 1; madvise's is
// ignored (a kernel without transparent huge pages refuses
// MADV_NOHUGEPAGE, and has no huge page to avoid).
var forkHelperCode = []byte{
	0x41, 0xbc, 0, 0, 0, 0, //             00 mov r12d, PAGES (patched)
	0x41, 0xbd, 0, 0, 0, 0, //             06 mov r13d, FORKS (patched)
	0x45, 0x31, 0xf6, //                   0c xor r14d, r14d
	0x48, 0x83, 0xec, 0x20, //             0f sub rsp, 32
	0x4d, 0x85, 0xe4, //                   13 test r12, r12
	0x74, 0x58, //                         16 je 70 (no pages)
	0x31, 0xff, //                         18 xor edi, edi          mmap(NULL,
	0x4c, 0x89, 0xe6, //                   1a mov rsi, r12
	0x48, 0xc1, 0xe6, 0x0c, //             1d shl rsi, 12             pages<<12,
	0xba, 0x03, 0, 0, 0, //                21 mov edx, 3              PROT_READ|PROT_WRITE,
	0x41, 0xba, 0x22, 0, 0, 0, //          26 mov r10d, 0x22          MAP_PRIVATE|MAP_ANONYMOUS,
	0x49, 0xc7, 0xc0, 0xff, 0xff, 0xff, 0xff, // 2c mov r8, -1        -1,
	0x45, 0x31, 0xc9, //                   33 xor r9d, r9d            0)
	0xb8, 0x09, 0, 0, 0, //                36 mov eax, 9 (SYS_mmap)
	0x0f, 0x05, //                         3b syscall
	0x48, 0x3d, 0x01, 0xf0, 0xff, 0xff, // 3d cmp rax, -4095
	0x0f, 0x83, 0xc1, 0, 0, 0, //          43 jae 10a (failed)
	0x48, 0x89, 0xc3, //                   49 mov rbx, rax
	0x48, 0x89, 0xc7, //                   4c mov rdi, rax          madvise(p, len,
	0xba, 0x0f, 0, 0, 0, //                4f mov edx, 15             MADV_NOHUGEPAGE)
	0xb8, 0x1c, 0, 0, 0, //                54 mov eax, 28 (SYS_madvise)
	0x0f, 0x05, //                         59 syscall
	0x4c, 0x89, 0xe1, //                   5b mov rcx, r12
	0x48, 0x89, 0xdf, //                   5e mov rdi, rbx
	0xc6, 0x07, 0x01, //                   61 mov byte [rdi], 1     touch each page
	0x48, 0x81, 0xc7, 0x00, 0x10, 0, 0, // 64 add rdi, 4096
	0x48, 0xff, 0xc9, //                   6b dec rcx
	0x75, 0xf1, //                         6e jne 61
	0x4d, 0x85, 0xed, //                   70 test r13, r13
	0x74, 0x6a, //                         73 je df (no forks)
	0xbf, 0x01, 0, 0, 0, //                75 mov edi, 1            clock_gettime(CLOCK_MONOTONIC,
	0x48, 0x89, 0xe6, //                   7a mov rsi, rsp            &t0)
	0xb8, 0xe4, 0, 0, 0, //                7d mov eax, 228 (SYS_clock_gettime)
	0x0f, 0x05, //                         82 syscall
	0xb8, 0x39, 0, 0, 0, //                84 mov eax, 57 (SYS_fork)
	0x0f, 0x05, //                         89 syscall
	0x48, 0x85, 0xc0, //                   8b test rax, rax
	0x74, 0x71, //                         8e je 101 (the child)
	0x78, 0x78, //                         90 js 10a (failed)
	0xbf, 0x01, 0, 0, 0, //                92 mov edi, 1            clock_gettime(CLOCK_MONOTONIC,
	0x48, 0x8d, 0x74, 0x24, 0x10, //       97 lea rsi, [rsp+16]       &t1)
	0xb8, 0xe4, 0, 0, 0, //                9c mov eax, 228
	0x0f, 0x05, //                         a1 syscall
	0x48, 0x8b, 0x44, 0x24, 0x10, //       a3 mov rax, [rsp+16]     r14 += t1 - t0 in ns
	0x48, 0x2b, 0x04, 0x24, //             a8 sub rax, [rsp]
	0x48, 0x69, 0xc0, 0x00, 0xca, 0x9a, 0x3b, // ac imul rax, rax, 1000000000
	0x48, 0x03, 0x44, 0x24, 0x18, //       b3 add rax, [rsp+24]
	0x48, 0x2b, 0x44, 0x24, 0x08, //       b8 sub rax, [rsp+8]
	0x49, 0x01, 0xc6, //                   bd add r14, rax
	0x48, 0xc7, 0xc7, 0xff, 0xff, 0xff, 0xff, // c0 mov rdi, -1       wait4(-1,
	0x31, 0xf6, //                         c7 xor esi, esi            NULL,
	0x31, 0xd2, //                         c9 xor edx, edx            0,
	0x45, 0x31, 0xd2, //                   cb xor r10d, r10d          NULL)
	0xb8, 0x3d, 0, 0, 0, //                ce mov eax, 61 (SYS_wait4)
	0x0f, 0x05, //                         d3 syscall
	0x48, 0x85, 0xc0, //                   d5 test rax, rax
	0x78, 0x30, //                         d8 js 10a (failed)
	0x49, 0xff, 0xcd, //                   da dec r13
	0x75, 0x96, //                         dd jne 75
	0x4c, 0x89, 0x34, 0x24, //             df mov [rsp], r14        write(1,
	0xbf, 0x01, 0, 0, 0, //                e3 mov edi, 1
	0x48, 0x89, 0xe6, //                   e8 mov rsi, rsp            &sum,
	0xba, 0x08, 0, 0, 0, //                eb mov edx, 8              8)
	0xb8, 0x01, 0, 0, 0, //                f0 mov eax, 1 (SYS_write)
	0x0f, 0x05, //                         f5 syscall
	0x48, 0x83, 0xf8, 0x08, //             f7 cmp rax, 8
	0x75, 0x0d, //                         fb jne 10a (failed)
	0x31, 0xff, //                         fd xor edi, edi
	0xeb, 0x02, //                         ff jmp 103
	0x31, 0xff, //                        101 xor edi, edi          the child: exit_group(0)
	0xb8, 0xe7, 0, 0, 0, //               103 mov eax, 231 (SYS_exit_group)
	0x0f, 0x05, //                        108 syscall
	0xbf, 0x01, 0, 0, 0, //               10a mov edi, 1            failed: exit_group(1)
	0xb8, 0xe7, 0, 0, 0, //               10f mov eax, 231
	0x0f, 0x05, //                        114 syscall
}

// The offsets in forkHelperCode of the two imm32 operands ForkHelperELF
// patches.
const (
	forkHelperPagesAt = 0x02
	forkHelperForksAt = 0x08
)

// forkHelperBase is where the helper's one PT_LOAD segment is mapped.
const forkHelperBase = 0x400000

// ForkHelperELF returns a static x86-64 Linux executable of one page's
// read-execute segment, no libraries and no data: the smallest process
// this package can fork. It maps pages anonymous private 4 KiB pages
// (MADV_NOHUGEPAGE) and writes to each, so that each is a present PTE,
// then forks forks times: each time it reads CLOCK_MONOTONIC, calls
// fork(2), reads the clock again, and reaps the child (wait4), which
// exits at once (exit_group). It then writes to stdout the sum of the
// forks' intervals in nanoseconds, a little-endian uint64, and exits 0.
//
// Each interval runs from inside one clock_gettime(2) to inside the next:
// the fork's syscall round trip, its kernel work in the parent
// (copy_process(), dup_mm(), wake_up_new_task()), and one more syscall's
// exit and entry. The child's run and exit and the wait4 are outside
// them while the child does not run before the parent's second
// clock_gettime (pinned to one CPU at SCHED_FIFO it cannot: it waits for
// its parent to sleep in wait4).
func ForkHelperELF(pages, forks uint32) []byte {
	code := bytes.Clone(forkHelperCode)
	binary.LittleEndian.PutUint32(code[forkHelperPagesAt:], pages)
	binary.LittleEndian.PutUint32(code[forkHelperForksAt:], forks)
	const ehsize, phsize = 64, 56
	size := uint64(ehsize + phsize + len(code))
	var b bytes.Buffer
	h := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Entry: forkHelperBase + ehsize + phsize, Phoff: ehsize,
		Ehsize: ehsize, Phentsize: phsize, Phnum: 1,
	}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	h.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	h.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	h.Ident[elf.EI_OSABI] = byte(elf.ELFOSABI_NONE)
	p := elf.Prog64{
		Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X),
		Vaddr: forkHelperBase, Paddr: forkHelperBase, Filesz: size, Memsz: size, Align: 0x1000,
	}
	binary.Write(&b, binary.LittleEndian, h)
	binary.Write(&b, binary.LittleEndian, p)
	b.Write(code)
	return b.Bytes()
}
