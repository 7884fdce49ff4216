package live

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os/exec"

	"mmlab/errno"
)

// forkHelperCode is the x86-64 code of the fork helper (ForkHelperELF),
// as GNU as assembles it (objdump -d -M intel of the bytes shows the
// listing below). It keeps the pages in r12, the forks left in r13, the
// length of the file to map in r15 and the CPU to pin to in r14; t0, t1
// (two struct timespec) and the record are on the stack; the path of the
// file follows the code.
//
// An error of sched_setaffinity, open, mmap, fork, write or wait4 exits
// with the errno as its status (ForkHelperExit names it; a short write,
// which a pipe never makes of 16 bytes, with 256 less its count);
// madvise's is ignored (a kernel without transparent huge pages refuses
// MADV_NOHUGEPAGE, and has no huge page to avoid).
var forkHelperCode = []byte{
	0x41, 0xbc, 0, 0, 0, 0, //                     000 mov r12d, PAGES (patched)
	0x41, 0xbd, 0, 0, 0, 0, //                     006 mov r13d, FORKS (patched; 0: until killed)
	0x41, 0xbf, 0, 0, 0, 0, //                     00c mov r15d, FILELEN (patched; 0: no file)
	0x41, 0xbe, 0, 0, 0, 0, //                     012 mov r14d, CPU (patched; -1: not pinned)
	0x48, 0x83, 0xec, 0x40, //                     018 sub rsp, 64
	0x41, 0x83, 0xfe, 0xff, //                     01c cmp r14d, -1
	0x74, 0x27, //                                 020 je 49
	0x31, 0xc0, //                                 022 xor eax, eax                     sched_setaffinity(0, 8, &mask), mask 1<<CPU
	0x4c, 0x0f, 0xab, 0xf0, //                     024 bts rax, r14
	0x48, 0x89, 0x44, 0x24, 0x30, //               028 mov [rsp+48], rax
	0x31, 0xff, //                                 02d xor edi, edi
	0xbe, 0x08, 0, 0, 0, //                        02f mov esi, 8
	0x48, 0x8d, 0x54, 0x24, 0x30, //               034 lea rdx, [rsp+48]
	0xb8, 0xcb, 0, 0, 0, //                        039 mov eax, 203
	0x0f, 0x05, //                                 03e syscall
	0x48, 0x85, 0xc0, //                           040 test rax, rax
	0x0f, 0x85, 0x70, 0x01, 0, 0, //               043 jne 1b9
	0x4d, 0x85, 0xff, //                           049 test r15, r15
	0x74, 0x4f, //                                 04c je 9d
	0x48, 0x8d, 0x3d, 0x6f, 0x01, 0, 0, //         04e lea rdi, [rip+0x16f]             open(path at 1c4, O_RDONLY)
	0x31, 0xf6, //                                 055 xor esi, esi
	0xb8, 0x02, 0, 0, 0, //                        057 mov eax, 2
	0x0f, 0x05, //                                 05c syscall
	0x48, 0x85, 0xc0, //                           05e test rax, rax
	0x0f, 0x88, 0x52, 0x01, 0, 0, //               061 js 1b9
	0x48, 0x89, 0xc3, //                           067 mov rbx, rax
	0x31, 0xff, //                                 06a xor edi, edi                     mmap(NULL, FILELEN, PROT_READ|PROT_EXEC, MAP_PRIVATE, fd, 0)
	0x4c, 0x89, 0xfe, //                           06c mov rsi, r15
	0xba, 0x05, 0, 0, 0, //                        06f mov edx, 5
	0x41, 0xba, 0x02, 0, 0, 0, //                  074 mov r10d, 2
	0x49, 0x89, 0xd8, //                           07a mov r8, rbx
	0x45, 0x31, 0xc9, //                           07d xor r9d, r9d
	0xb8, 0x09, 0, 0, 0, //                        080 mov eax, 9
	0x0f, 0x05, //                                 085 syscall
	0x48, 0x3d, 0x01, 0xf0, 0xff, 0xff, //         087 cmp rax, 18446744073709547521
	0x0f, 0x83, 0x26, 0x01, 0, 0, //               08d jae 1b9
	0x48, 0x89, 0xdf, //                           093 mov rdi, rbx                     close(fd)
	0xb8, 0x03, 0, 0, 0, //                        096 mov eax, 3
	0x0f, 0x05, //                                 09b syscall
	0x4d, 0x85, 0xe4, //                           09d test r12, r12
	0x74, 0x58, //                                 0a0 je fa
	0x31, 0xff, //                                 0a2 xor edi, edi                     mmap(NULL, PAGES<<12, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0)
	0x4c, 0x89, 0xe6, //                           0a4 mov rsi, r12
	0x48, 0xc1, 0xe6, 0x0c, //                     0a7 shl rsi, 12
	0xba, 0x03, 0, 0, 0, //                        0ab mov edx, 3
	0x41, 0xba, 0x22, 0, 0, 0, //                  0b0 mov r10d, 34
	0x49, 0xc7, 0xc0, 0xff, 0xff, 0xff, 0xff, //   0b6 mov r8, 18446744073709551615
	0x45, 0x31, 0xc9, //                           0bd xor r9d, r9d
	0xb8, 0x09, 0, 0, 0, //                        0c0 mov eax, 9
	0x0f, 0x05, //                                 0c5 syscall
	0x48, 0x3d, 0x01, 0xf0, 0xff, 0xff, //         0c7 cmp rax, 18446744073709547521
	0x0f, 0x83, 0xe6, 0, 0, 0, //                  0cd jae 1b9
	0x48, 0x89, 0xc3, //                           0d3 mov rbx, rax
	0x48, 0x89, 0xc7, //                           0d6 mov rdi, rax                     madvise(p, len, MADV_NOHUGEPAGE)
	0xba, 0x0f, 0, 0, 0, //                        0d9 mov edx, 15
	0xb8, 0x1c, 0, 0, 0, //                        0de mov eax, 28
	0x0f, 0x05, //                                 0e3 syscall
	0x4c, 0x89, 0xe1, //                           0e5 mov rcx, r12
	0x48, 0x89, 0xdf, //                           0e8 mov rdi, rbx
	0xc6, 0x07, 0x01, //                           0eb mov byte [rdi], 1                touch each page
	0x48, 0x81, 0xc7, 0, 0x10, 0, 0, //            0ee add rdi, 0x1000
	0x48, 0xff, 0xc9, //                           0f5 dec rcx
	0x75, 0xf1, //                                 0f8 jne eb
	0xbf, 0x01, 0, 0, 0, //                        0fa mov edi, 1                       clock_gettime(CLOCK_MONOTONIC, &t0)
	0x48, 0x89, 0xe6, //                           0ff mov rsi, rsp
	0xb8, 0xe4, 0, 0, 0, //                        102 mov eax, 228
	0x0f, 0x05, //                                 107 syscall
	0xb8, 0x39, 0, 0, 0, //                        109 mov eax, 57                      fork()
	0x0f, 0x05, //                                 10e syscall
	0x48, 0x85, 0xc0, //                           110 test rax, rax
	0x0f, 0x84, 0x97, 0, 0, 0, //                  113 je 1b0
	0x0f, 0x88, 0x9a, 0, 0, 0, //                  119 js 1b9
	0xbf, 0x01, 0, 0, 0, //                        11f mov edi, 1                       clock_gettime(CLOCK_MONOTONIC, &t1)
	0x48, 0x8d, 0x74, 0x24, 0x10, //               124 lea rsi, [rsp+16]
	0xb8, 0xe4, 0, 0, 0, //                        129 mov eax, 228
	0x0f, 0x05, //                                 12e syscall
	0x48, 0x8b, 0x04, 0x24, //                     130 mov rax, [rsp]                   start = t0 in ns
	0x48, 0x69, 0xc0, 0, 0xca, 0x9a, 0x3b, //      134 imul rax, rax, 0x3b9aca00
	0x48, 0x03, 0x44, 0x24, 0x08, //               13b add rax, [rsp+8]
	0x48, 0x89, 0x44, 0x24, 0x20, //               140 mov [rsp+32], rax
	0x48, 0x8b, 0x44, 0x24, 0x10, //               145 mov rax, [rsp+16]                dur = t1 - t0 in ns
	0x48, 0x2b, 0x04, 0x24, //                     14a sub rax, [rsp]
	0x48, 0x69, 0xc0, 0, 0xca, 0x9a, 0x3b, //      14e imul rax, rax, 0x3b9aca00
	0x48, 0x03, 0x44, 0x24, 0x18, //               155 add rax, [rsp+24]
	0x48, 0x2b, 0x44, 0x24, 0x08, //               15a sub rax, [rsp+8]
	0x48, 0x89, 0x44, 0x24, 0x28, //               15f mov [rsp+40], rax
	0xbf, 0x01, 0, 0, 0, //                        164 mov edi, 1                       write(1, &{start, dur}, 16)
	0x48, 0x8d, 0x74, 0x24, 0x20, //               169 lea rsi, [rsp+32]
	0xba, 0x10, 0, 0, 0, //                        16e mov edx, 16
	0xb8, 0x01, 0, 0, 0, //                        173 mov eax, 1
	0x0f, 0x05, //                                 178 syscall
	0x48, 0x83, 0xf8, 0x10, //                     17a cmp rax, 16
	0x75, 0x39, //                                 17e jne 1b9
	0x48, 0xc7, 0xc7, 0xff, 0xff, 0xff, 0xff, //   180 mov rdi, 18446744073709551615 wait4(-1, NULL, 0, NULL)
	0x31, 0xf6, //                                 187 xor esi, esi
	0x31, 0xd2, //                                 189 xor edx, edx
	0x45, 0x31, 0xd2, //                           18b xor r10d, r10d
	0xb8, 0x3d, 0, 0, 0, //                        18e mov eax, 61
	0x0f, 0x05, //                                 193 syscall
	0x48, 0x85, 0xc0, //                           195 test rax, rax
	0x78, 0x1f, //                                 198 js 1b9
	0x4d, 0x85, 0xed, //                           19a test r13, r13                    FORKS == 0: again
	0x0f, 0x84, 0x57, 0xff, 0xff, 0xff, //         19d je fa
	0x49, 0xff, 0xcd, //                           1a3 dec r13                          --FORKS: again while not 0
	0x0f, 0x85, 0x4e, 0xff, 0xff, 0xff, //         1a6 jne fa
	0x31, 0xff, //                                 1ac xor edi, edi                     exit_group(0)
	0xeb, 0x02, //                                 1ae jmp 1b2
	0x31, 0xff, //                                 1b0 xor edi, edi                     the child: exit_group(0)
	0xb8, 0xe7, 0, 0, 0, //                        1b2 mov eax, 231
	0x0f, 0x05, //                                 1b7 syscall
	0x89, 0xc7, //                                 1b9 mov edi, eax                     failed: exit_group(-rax), the errno
	0xf7, 0xdf, //                                 1bb neg edi
	0xb8, 0xe7, 0, 0, 0, //                        1bd mov eax, 231
	0x0f, 0x05, //                                 1c2 syscall
}

// The offsets in forkHelperCode of the imm32 operands ForkHelperELF
// patches.
const (
	forkHelperPagesAt   = 0x02
	forkHelperForksAt   = 0x08
	forkHelperFileLenAt = 0x0e
	forkHelperCPUAt     = 0x14
)

// forkHelperBase is where the helper's one PT_LOAD segment is mapped.
const forkHelperBase = 0x400000

// ForkHelper is what a fork helper (ForkHelperELF) does before its forks,
// and how many it makes.
type ForkHelper struct {
	// Pages is the anonymous private 4 KiB pages (MADV_NOHUGEPAGE) it
	// maps and writes to, each a present PTE that each fork copies.
	Pages uint32
	// Forks is how many times it forks; 0 forks until it is killed or its
	// stdout is closed.
	Forks uint32
	// CPU is the CPU it pins itself to (sched_setaffinity), -1 none (it
	// keeps the affinity it was started with). At most 63.
	CPU int
	// File, if not "", is a file it maps whole, read-execute and private,
	// FileLen bytes of it, as a process maps its text: a uprobe on the
	// file is installed in its mm, and each fork copies the breakpoint.
	File    string
	FileLen uint32
}

// ForkHelperELF returns a static x86-64 Linux executable of one page's
// read-execute segment, no libraries and no data: the smallest process
// that can fork. It does what h says, then forks: each time it reads
// CLOCK_MONOTONIC, calls fork(2), reads the clock again, writes to stdout
// a record of 16 bytes, the first clock read and the interval, each in
// nanoseconds as a little-endian uint64, and reaps the child (wait4),
// which exits at once (exit_group). After the last fork it exits 0.
//
// Each interval runs from inside one clock_gettime(2) to inside the next:
// the fork's syscall round trip, its kernel work in the parent
// (copy_process(), dup_mm(), wake_up_new_task()), and one more syscall's
// exit and entry. The child's run and exit and the wait4 are outside
// them while the child does not run before the parent's second
// clock_gettime.
func ForkHelperELF(h ForkHelper) []byte {
	code := bytes.Clone(forkHelperCode)
	cpu := uint32(math.MaxUint32)
	if h.CPU >= 0 {
		cpu = uint32(h.CPU)
	}
	fileLen := h.FileLen
	if h.File == "" {
		fileLen = 0
	}
	binary.LittleEndian.PutUint32(code[forkHelperPagesAt:], h.Pages)
	binary.LittleEndian.PutUint32(code[forkHelperForksAt:], h.Forks)
	binary.LittleEndian.PutUint32(code[forkHelperFileLenAt:], fileLen)
	binary.LittleEndian.PutUint32(code[forkHelperCPUAt:], cpu)
	code = append(append(code, h.File...), 0)
	const ehsize, phsize = 64, 56
	size := uint64(ehsize + phsize + len(code))
	var b bytes.Buffer
	hdr := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Entry: forkHelperBase + ehsize + phsize, Phoff: ehsize,
		Ehsize: ehsize, Phentsize: phsize, Phnum: 1,
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	hdr.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	hdr.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	hdr.Ident[elf.EI_OSABI] = byte(elf.ELFOSABI_NONE)
	p := elf.Prog64{
		Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X),
		Vaddr: forkHelperBase, Paddr: forkHelperBase, Filesz: size, Memsz: size, Align: 0x1000,
	}
	binary.Write(&b, binary.LittleEndian, hdr)
	binary.Write(&b, binary.LittleEndian, p)
	b.Write(code)
	return b.Bytes()
}

// ForkRecord is one fork a fork helper timed, on CLOCK_MONOTONIC.
type ForkRecord struct{ Start, Dur int64 }

// Append appends r to b as a fork helper writes it: Start, then Dur, each
// a little-endian uint64.
func (r ForkRecord) Append(b []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(r.Start))
	return binary.LittleEndian.AppendUint64(b, uint64(r.Dur))
}

// ParseForkRecord parses the record in the first 16 bytes of b.
func ParseForkRecord(b []byte) ForkRecord {
	return ForkRecord{int64(binary.LittleEndian.Uint64(b)), int64(binary.LittleEndian.Uint64(b[8:16]))}
}

// ParseForkRecords parses a fork helper's records; a partial record at
// the end is left out.
func ParseForkRecords(b []byte) []ForkRecord {
	recs := make([]ForkRecord, 0, len(b)/16)
	for ; len(b) >= 16; b = b[16:] {
		recs = append(recs, ParseForkRecord(b))
	}
	return recs
}

// ForkHelperExit returns err, the error of a fork helper's run (exec.Cmd's
// Run or Wait), with the errno that its exit status is (ForkHelperELF) named.
func ForkHelperExit(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() > 0 && ee.ExitCode() < 256-16 {
		return fmt.Errorf("%w: %w", err, errno.Errno(ee.ExitCode()))
	}
	return err
}
