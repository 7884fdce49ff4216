// Package trace is mmlab's language of address-space operations: one op a
// line (mmap, munmap, mprotect, mremap, touch, poke, peek, exec, write, fork,
// exit, maps),
// run either on the model or on the live kernel, which must print the same
// bytes. It parses and validates traces, prints them back in canonical form,
// normalizes and compares the outputs of two targets, and generates random
// traces from a seed.
//
// The language:
//
//	arena LO HI                          optional, before any other op
//	file NAME SIZE                       a file whose byte i is i % 251
//	mmap ADDR LEN PROT FLAGS [NAME OFF]  PROT rwx or -; FLAGS private|shared,
//	                                     fixed|noreplace|hint, optional populate
//	munmap ADDR LEN
//	mprotect ADDR LEN PROT
//	mremap ADDR OLDLEN NEWLEN [maymove fixed NEWADDR]
//	touch ADDR | poke ADDR VALUE | peek ADDR
//	exec ADDR | write ADDR
//	fork | exit | maps
//
// Numbers are decimal or 0x-hex; LEN, SIZE and OFF may end in K, M or G.
package trace

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Kind is the kind of one op.
type Kind int

// The ops of the language. The arena is not an op: it is folded into
// Program.
const (
	OpFile Kind = iota
	OpMmap
	OpMunmap
	OpMprotect
	OpMremap
	OpTouch
	OpPoke
	OpPeek
	OpFork
	OpExit
	OpMaps
	OpExec
	OpWrite
)

var kindNames = [...]string{"file", "mmap", "munmap", "mprotect", "mremap", "touch", "poke", "peek", "fork", "exit", "maps", "exec", "write"}

func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Prot is a protection, with the bits of PROT_READ, PROT_WRITE, PROT_EXEC.
type Prot uint8

// The protection bits.
const (
	ProtRead  Prot = 1
	ProtWrite Prot = 2
	ProtExec  Prot = 4
)

// String gives the protection as the trace writes it: "rw-".
func (p Prot) String() string {
	b := []byte("---")
	if p&ProtRead != 0 {
		b[0] = 'r'
	}
	if p&ProtWrite != 0 {
		b[1] = 'w'
	}
	if p&ProtExec != 0 {
		b[2] = 'x'
	}
	return string(b)
}

// Op is one op of a trace. Which fields matter depends on Kind.
type Op struct {
	Line int // line number in the trace text, counting every line from 1
	Kind Kind

	Addr, Len uint64 // mmap, munmap, mprotect, mremap (old addr and len), touch/poke/peek (Addr)
	Prot      Prot   // mmap, mprotect

	// mmap flags: exactly one of Fixed (MAP_FIXED), NoReplace
	// (MAP_FIXED_NOREPLACE) and Hint (neither: Addr is a hint).
	Shared, Fixed, NoReplace, Hint, Populate bool

	File string // mmap: file-backed when not ""; file: the file's name
	Off  uint64 // mmap: file offset

	NewLen  uint64 // mremap
	MayMove bool   // mremap: MREMAP_MAYMOVE|MREMAP_FIXED to NewAddr
	NewAddr uint64 // mremap

	Value byte   // poke
	Size  uint64 // file
}

// Program is a parsed trace: its arena and its ops, file ops included, in
// order.
type Program struct {
	ArenaLo, ArenaHi uint64
	Ops              []Op
}

// The default arena, far from where the kernel places a process's own
// mappings (top-down from below 0x7fffffffffff) and its executable.
const (
	DefaultArenaLo = 0x100000000000
	DefaultArenaHi = 0x110000000000
)

// Limits of the language.
const (
	PageSize = 4096
	MaxLen   = 1 << 30 // largest LEN, OLDLEN, NEWLEN or SIZE, and all SIZEs together
	// MaxUserAddr is the end of the x86-64 user address space with 4-level
	// page tables (TASK_SIZE plus its last, never mapped page): a machine
	// without 5-level paging runs no arena above it (UserAddrEnd).
	MaxUserAddr = 1 << 47
	// MaxUserAddrLA57 is the end of the user address space with 5-level
	// paging (la57), the highest arena end Parse accepts.
	MaxUserAddrLA57 = 1 << 56
	// PortableArenaLo is the lowest arena Generate makes but the low
	// family's: at or above every distribution's vm.mmap_min_addr and
	// CONFIG_LSM_MMAP_MIN_ADDR (65536), so that a generated trace gets the
	// same answers on every machine. Parse accepts lower arenas, down to page 0: there a hint is
	// raised to mmap_min_addr and a fixed mapping below vm.mmap_min_addr
	// needs CAP_SYS_RAWIO, so the answers depend on the machine, and each
	// target gives its machine's.
	PortableArenaLo = 0x10000
	// MaxLineLen is the most bytes a line may hold before its comment; a
	// comment may be of any length.
	MaxLineLen = 4096
	// MaxOps is the most ops a trace may hold, so that a trace of any size
	// is parsed in bounded memory (an op takes about 100 bytes).
	MaxOps = 100000
)

// Zone is a range of addresses where the kernel places a process's own
// mappings.
type Zone struct {
	Lo, Hi uint64
	What   string
}

// ProcessZones are the ranges where Linux on x86-64 (4-level page tables,
// the default top-down layout, ASLR's largest randomization, vm.mmap_rnd_bits
// 32) places the mappings every process holds of its own, the live runner's
// helper among them (which undoes a personality or a stack rlimit that would
// change that layout): no arena may overlap them, so that a trace one target
// refuses the other refuses too, before anything runs.
var ProcessZones = []Zone{
	// fs/binfmt_elf.c: a PIE loads at ELF_ET_DYN_BASE (0x555555554000) plus
	// arch_mmap_rnd() (< 2^44); the brk heap follows within 32 MiB.
	{0x550000000000, 0x660000000000, "the executable and its heap"},
	// arch/x86/mm/mmap.c:mmap_base(): the mmap area (libraries, vDSO) grows
	// down from at most 2^44 plus a gap below TASK_SIZE, the gap at least the
	// stack's randomization (16 GiB).
	{0x6f0000000000, StackZoneLo, "the shared libraries, vDSO and other mmap-area mappings"},
}

// StackZoneLo starts the top 16 GiB of the 47-bit address space (below
// MaxUserAddr), where the stack lies at a random place
// (randomize_stack_top(): STACK_RND_MASK pages below STACK_TOP, which is
// DEFAULT_MAP_WINDOW with 5-level paging too). An arena may overlap at most
// MaxStackZoneArena bytes of it: a
// live runner whose process finds its stack in the arena runs the trace
// again in a fresh process, whose stack lies elsewhere.
const (
	StackZoneLo       = 0x7ffc00000000
	MaxStackZoneArena = 1 << 30
)

// SyntaxError is a malformed trace: the line (counting every line from 1) and
// what is wrong with it.
type SyntaxError struct {
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%d: %s", e.Line, e.Msg) }

// Language describes the trace language for a user: mmlab replay --help
// prints it.
const Language = `The language, one op a line, '#' starts a comment:
  arena LO HI                          optional, before any other op;
                                       default 0x100000000000 0x110000000000;
                                       HI <= 0x800000000000 (2^47), or 2^56 on
                                       a machine with 5-level paging (la57);
                                       clear of the process's own mappings:
                                       0x550000000000-0x660000000000 and
                                       0x6f0000000000-0x7ffc00000000, and at
                                       most 1 GiB of 0x7ffc00000000-2^47 (the
                                       stack). LO may be 0: below 0x10000 the
                                       answers depend on the machine, a hint
                                       is raised to mmap_min_addr, a fixed map
                                       below vm.mmap_min_addr needs
                                       CAP_SYS_RAWIO (else EPERM)
  file NAME SIZE                       a file of SIZE bytes; byte i is i % 251
  mmap ADDR LEN PROT FLAGS [NAME OFF]  PROT: r or -, w or -, x or- ("rw-");
                                       FLAGS: private|shared, one of fixed,
                                       noreplace or hint (ADDR is a hint: the
                                       kernel may place the mapping elsewhere,
                                       shown by maps only inside the arena),
                                       optional populate, comma-separated;
                                       anonymous unless NAME OFF follow
  munmap ADDR LEN
  mprotect ADDR LEN PROT
  mremap ADDR OLDLEN NEWLEN [maymove fixed NEWADDR]
  touch ADDR                           read one byte
  poke ADDR VALUE                      write one byte
  peek ADDR                            read one byte, print "peek ADDR VALUE"
  exec ADDR                            call ADDR, which must hold a ret (0xc3: a
                                       file's byte 195, or a poked 195); the
                                       byte is first read as a debugger reads
                                       it (/proc/PID/mem), and a mapped byte
                                       that is not a ret prints "error LINE
                                       notret" and runs nothing
  write ADDR                           write(2) one byte from ADDR to a pipe:
                                       the kernel reads it (copy_from_user)
  fork                                 the ops that follow run in a child...
  exit                                 ...until exit (or the end), then the
                                       parent goes on
  maps                                 print the VMAs overlapping the arena,
                                       then an empty line
Numbers are decimal or 0x-hex; LEN, SIZE and OFF may end in K, M or G.
LEN, OLDLEN, NEWLEN and SIZE are at most 1G, all SIZEs together too; a line
holds at most 4096 bytes before its comment, a trace at most 100000 ops.
An op the kernel refuses prints "error LINE ERRNO" (error 7 EEXIST); an access
that faults prints the signal and its si_code: "error LINE SIGSEGV SEGV_MAPERR"
(no mapping), "SEGV_ACCERR" (the protection), "SEGV_PKUERR" (a protection
key: on a CPU with protection keys a PROT_EXEC-only mapping is execute-only),
or "error LINE SIGBUS BUS_ADRERR".`

// Parse reads a trace and validates all of it before anything
// runs: unknown ops or flags, missing or extra fields, maymove without fixed
// NEWADDR, FLAGS without exactly one of fixed/noreplace/hint, arenas over the
// process's own mappings (ProcessZones) or ending above MaxUserAddrLA57
// (a runner refuses one above its machine's UserAddrEnd, ValidateFor),
// addresses or ranges outside the
// arena, lengths over 1 GiB, files of more than 1 GiB in all, exit with no
// process to return to, files used before they are declared or declared
// twice, and lines over MaxLineLen bytes before their comment. A malformed
// trace gives a *SyntaxError; an error reading r is returned as it is. Parse
// holds at most MaxLineLen bytes of a line, however long.
func Parse(r io.Reader) (*Program, error) {
	p := &Program{ArenaLo: DefaultArenaLo, ArenaHi: DefaultArenaHi}
	lr := &lineReader{r: bufio.NewReader(r)}
	files := map[string]bool{}
	var fileBytes uint64
	depth := 0
	arena := false
	for {
		text, more, err := lr.next()
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
		f := strings.Fields(text)
		if len(f) == 0 {
			continue
		}
		ps := &lineParser{line: lr.line, f: f, p: p}
		if f[0] == "arena" {
			if len(p.Ops) > 0 || arena {
				return nil, ps.errorf("arena must come before any other op, once")
			}
			if err := ps.arena(); err != nil {
				return nil, err
			}
			arena = true
			continue
		}
		op, err := ps.op(files)
		if err != nil {
			return nil, err
		}
		switch op.Kind {
		case OpFork:
			depth++
		case OpExit:
			if depth == 0 {
				return nil, ps.errorf("exit with no process to return to")
			}
			depth--
		case OpFile:
			files[op.File] = true
			if fileBytes += op.Size; fileBytes > MaxLen {
				return nil, ps.errorf("the files take over 1 GiB in all")
			}
		}
		if len(p.Ops) == MaxOps {
			return nil, ps.errorf("more than %d ops: split the trace", MaxOps)
		}
		p.Ops = append(p.Ops, op)
	}
	return p, nil
}

// lineReader reads a trace line by line, keeping at most MaxLineLen bytes of
// a line and none of its comment.
type lineReader struct {
	r    *bufio.Reader
	line int // the line last returned, counting from 1
	buf  []byte
}

// next returns the next line without its comment; more is false at the end.
func (lr *lineReader) next() (text string, more bool, err error) {
	lr.buf = lr.buf[:0]
	comment, long, read := false, false, false
	for {
		chunk, err := lr.r.ReadSlice('\n')
		read = read || len(chunk) > 0
		if !comment {
			data := bytes.TrimSuffix(chunk, []byte("\n"))
			if i := bytes.IndexByte(data, '#'); i >= 0 {
				data, comment = data[:i], true
			}
			if len(lr.buf)+len(data) > MaxLineLen {
				long = true
			} else if !long {
				lr.buf = append(lr.buf, data...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil && err != io.EOF {
			return "", false, fmt.Errorf("reading line %d: %w", lr.line+1, err)
		}
		if !read {
			return "", false, nil // the end, after a newline or at the start
		}
		lr.line++
		if long {
			return "", false, &SyntaxError{Line: lr.line, Msg: fmt.Sprintf("line over %d bytes before its comment", MaxLineLen)}
		}
		return string(lr.buf), true, nil
	}
}

type lineParser struct {
	line int
	f    []string
	p    *Program
}

func (ps *lineParser) errorf(format string, args ...any) error {
	return &SyntaxError{Line: ps.line, Msg: fmt.Sprintf(format, args...)}
}

func (ps *lineParser) fields(n int, usage string) error {
	if len(ps.f) < n {
		return ps.errorf("missing field: usage: %s", usage)
	}
	if len(ps.f) > n {
		return ps.errorf("extra field %q: usage: %s", ps.f[n], usage)
	}
	return nil
}

func (ps *lineParser) arena() error {
	if err := ps.fields(3, "arena LO HI"); err != nil {
		return err
	}
	lo, err := ps.number(ps.f[1], "LO", false)
	if err != nil {
		return err
	}
	hi, err := ps.number(ps.f[2], "HI", false)
	if err != nil {
		return err
	}
	if lo%PageSize != 0 || hi%PageSize != 0 {
		return ps.errorf("arena bounds must be page aligned")
	}
	if lo >= hi || hi > MaxUserAddrLA57 {
		return ps.errorf("arena must satisfy LO < HI <= %#x", uint64(MaxUserAddrLA57))
	}
	for _, z := range ProcessZones {
		if lo < z.Hi && hi > z.Lo {
			return ps.errorf("arena overlaps %#x-%#x, where the kernel places a process's own mappings (%s)", z.Lo, z.Hi, z.What)
		}
	}
	if hi > StackZoneLo && lo < MaxUserAddr && min(hi, MaxUserAddr)-max(lo, StackZoneLo) > MaxStackZoneArena {
		return ps.errorf("arena holds over 1 GiB of %#x-%#x, where the kernel places a process's stack", uint64(StackZoneLo), uint64(MaxUserAddr))
	}
	ps.p.ArenaLo, ps.p.ArenaHi = lo, hi
	return nil
}

// number parses a decimal or 0x-hex number; with size, a K, M or G suffix
// multiplies it by 1024, 1024², 1024³.
func (ps *lineParser) number(s, what string, size bool) (uint64, error) {
	mul := uint64(1)
	t := s
	if size && len(t) > 0 {
		switch t[len(t)-1] {
		case 'K', 'k':
			mul = 1 << 10
		case 'M', 'm':
			mul = 1 << 20
		case 'G', 'g':
			mul = 1 << 30
		}
		if mul != 1 {
			t = t[:len(t)-1]
		}
	}
	var v uint64
	var err error
	if strings.HasPrefix(t, "0x") || strings.HasPrefix(t, "0X") {
		v, err = strconv.ParseUint(t[2:], 16, 64)
	} else {
		v, err = strconv.ParseUint(t, 10, 64)
	}
	if err != nil || t == "" {
		return 0, ps.errorf("%s: bad number %q", what, s)
	}
	if v > ^uint64(0)/mul {
		return 0, ps.errorf("%s: %q overflows", what, s)
	}
	return v * mul, nil
}

// length parses a LEN, OLDLEN, NEWLEN or SIZE: at most 1 GiB.
func (ps *lineParser) length(s, what string) (uint64, error) {
	v, err := ps.number(s, what, true)
	if err != nil {
		return 0, err
	}
	if v > MaxLen {
		return 0, ps.errorf("%s %s is over 1 GiB", what, s)
	}
	return v, nil
}

// inArena checks that [addr, addr+n) lies in the arena (n may be 0: then addr
// must lie in [LO, HI]; touch/poke/peek pass n = 1).
func (ps *lineParser) inArena(what string, addr, n uint64) error {
	lo, hi := ps.p.ArenaLo, ps.p.ArenaHi
	if addr < lo || addr > hi || n > hi-addr {
		return ps.errorf("%s %#x+%#x is outside the arena %#x-%#x", what, addr, n, lo, hi)
	}
	return nil
}

// addrLen parses the ADDR and LEN fields (1 and 2) of an mmap, munmap or
// mprotect line into op and checks that the range lies in the arena.
func (ps *lineParser) addrLen(op *Op) error {
	var err error
	if op.Addr, err = ps.number(ps.f[1], "ADDR", false); err != nil {
		return err
	}
	if op.Len, err = ps.length(ps.f[2], "LEN"); err != nil {
		return err
	}
	return ps.inArena("range", op.Addr, op.Len)
}

// address parses the ADDR field (1) of a touch, peek or poke line into op and
// checks that the byte there lies in the arena.
func (ps *lineParser) address(op *Op) error {
	var err error
	if op.Addr, err = ps.number(ps.f[1], "ADDR", false); err != nil {
		return err
	}
	return ps.inArena("address", op.Addr, 1)
}

func (ps *lineParser) prot(s string) (Prot, error) {
	if len(s) != 3 {
		return 0, ps.errorf("bad PROT %q: want three chars, r or -, w or -, x or -", s)
	}
	var p Prot
	for i, want := range []byte("rwx") {
		switch s[i] {
		case want:
			p |= 1 << i
		case '-':
		default:
			return 0, ps.errorf("bad PROT %q: want three chars, r or -, w or -, x or -", s)
		}
	}
	return p, nil
}

const (
	usageMmap   = "mmap ADDR LEN PROT FLAGS [NAME OFF]"
	usageMremap = "mremap ADDR OLDLEN NEWLEN [maymove fixed NEWADDR]"
)

func (ps *lineParser) op(files map[string]bool) (Op, error) {
	op := Op{Line: ps.line}
	f := ps.f
	var err error
	switch f[0] {
	case "file":
		op.Kind = OpFile
		if err = ps.fields(3, "file NAME SIZE"); err != nil {
			return op, err
		}
		if !validName(f[1]) {
			return op, ps.errorf("bad file NAME %q: use letters, digits, '.', '_' and '-', not starting with '.'", f[1])
		}
		if files[f[1]] {
			return op, ps.errorf("file %q declared twice", f[1])
		}
		op.File = f[1]
		op.Size, err = ps.length(f[2], "SIZE")
	case "mmap":
		op.Kind = OpMmap
		if len(f) != 5 && len(f) != 7 {
			if len(f) < 5 || len(f) == 6 {
				return op, ps.errorf("missing field: usage: %s", usageMmap)
			}
			return op, ps.errorf("extra field %q: usage: %s", f[7], usageMmap)
		}
		if err = ps.addrLen(&op); err != nil {
			return op, err
		}
		if op.Prot, err = ps.prot(f[3]); err != nil {
			return op, err
		}
		if err = ps.mmapFlags(&op, f[4]); err != nil {
			return op, err
		}
		if len(f) == 7 {
			if !files[f[5]] {
				return op, ps.errorf("file %q is not declared by an earlier file line", f[5])
			}
			op.File = f[5]
			if op.Off, err = ps.number(f[6], "OFF", true); err != nil {
				return op, err
			}
		}
	case "munmap", "mprotect":
		n, usage := 3, "munmap ADDR LEN"
		op.Kind = OpMunmap
		if f[0] == "mprotect" {
			op.Kind, n, usage = OpMprotect, 4, "mprotect ADDR LEN PROT"
		}
		if err = ps.fields(n, usage); err != nil {
			return op, err
		}
		if err = ps.addrLen(&op); err != nil {
			return op, err
		}
		if op.Kind == OpMprotect {
			op.Prot, err = ps.prot(f[3])
		}
	case "mremap":
		op.Kind = OpMremap
		switch {
		case len(f) == 4:
		case len(f) > 7:
			return op, ps.errorf("extra field %q: usage: %s", f[7], usageMremap)
		case len(f) == 7 && f[4] == "maymove" && f[5] == "fixed":
			op.MayMove = true
		case len(f) > 4 && f[4] == "maymove":
			return op, ps.errorf("maymove needs fixed NEWADDR: usage: %s", usageMremap)
		case len(f) > 4 && f[4] != "maymove":
			return op, ps.errorf("unknown mremap flag %q: usage: %s", f[4], usageMremap)
		default:
			return op, ps.errorf("missing field: usage: %s", usageMremap)
		}
		if op.Addr, err = ps.number(f[1], "ADDR", false); err != nil {
			return op, err
		}
		if op.Len, err = ps.length(f[2], "OLDLEN"); err != nil {
			return op, err
		}
		if op.NewLen, err = ps.length(f[3], "NEWLEN"); err != nil {
			return op, err
		}
		if err = ps.inArena("range", op.Addr, op.Len); err != nil {
			return op, err
		}
		if op.MayMove {
			if op.NewAddr, err = ps.number(f[6], "NEWADDR", false); err != nil {
				return op, err
			}
			err = ps.inArena("new range", op.NewAddr, op.NewLen)
		} else {
			err = ps.inArena("new range", op.Addr, op.NewLen)
		}
	case "touch", "peek", "exec", "write":
		op.Kind = map[string]Kind{"touch": OpTouch, "peek": OpPeek, "exec": OpExec, "write": OpWrite}[f[0]]
		if err = ps.fields(2, f[0]+" ADDR"); err != nil {
			return op, err
		}
		err = ps.address(&op)
	case "poke":
		op.Kind = OpPoke
		if err = ps.fields(3, "poke ADDR VALUE"); err != nil {
			return op, err
		}
		if err = ps.address(&op); err != nil {
			return op, err
		}
		var v uint64
		if v, err = ps.number(f[2], "VALUE", false); err != nil {
			return op, err
		}
		if v > 255 {
			return op, ps.errorf("VALUE %s is over 255", f[2])
		}
		op.Value = byte(v)
	case "fork", "exit", "maps":
		op.Kind = OpMaps
		if f[0] == "fork" {
			op.Kind = OpFork
		} else if f[0] == "exit" {
			op.Kind = OpExit
		}
		err = ps.fields(1, f[0])
	default:
		return op, ps.errorf("unknown op %q", f[0])
	}
	return op, err
}

func (ps *lineParser) mmapFlags(op *Op, s string) error {
	var private, shared bool
	for _, fl := range strings.Split(s, ",") {
		var b *bool
		switch fl {
		case "private":
			b = &private
		case "shared":
			b = &shared
		case "fixed":
			b = &op.Fixed
		case "noreplace":
			b = &op.NoReplace
		case "hint":
			b = &op.Hint
		case "populate":
			b = &op.Populate
		default:
			return ps.errorf("unknown mmap flag %q", fl)
		}
		if *b {
			return ps.errorf("mmap flag %q given twice", fl)
		}
		*b = true
	}
	if private == shared {
		return ps.errorf("FLAGS %q: need exactly one of private or shared", s)
	}
	if n := btoi(op.Fixed) + btoi(op.NoReplace) + btoi(op.Hint); n != 1 {
		return ps.errorf("FLAGS %q: need exactly one of fixed, noreplace or hint", s)
	}
	op.Shared = shared
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// validName reports whether s may name a trace file: it must print as one
// field in /proc/PID/maps and never be a path.
func validName(s string) bool {
	if s == "" || s[0] == '.' || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}
