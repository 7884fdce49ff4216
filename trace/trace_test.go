package trace

import (
	"errors"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"mmlab/machine"
)

func TestParseValid(t *testing.T) {
	t.Parallel()
	src := `# a comment line
arena 0x200000000000 0x200100000000

file data 8K   # two pages
mmap 0x200000000000 4K rw- private,fixed
mmap 0x200000001000 0x2000 r-x shared,noreplace,populate data 4K
munmap 0x200000000000 4096
mprotect 0x200000001000 1M ---
mremap 0x200000001000 4K 8K
mremap 0x200000001000 8K 4K maymove fixed 0x200000100000
touch 0x200000001fff
poke 0x200000001000 0xff
peek 0x200000001000
fork
maps
exit
mmap 0x200000003000 4K r-- private,hint
`
	p, err := Parse(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	if p.ArenaLo != 0x200000000000 || p.ArenaHi != 0x200100000000 {
		t.Errorf("arena %#x-%#x", p.ArenaLo, p.ArenaHi)
	}
	want := []Op{
		{Line: 4, Kind: OpFile, File: "data", Size: 8192},
		{Line: 5, Kind: OpMmap, Addr: 0x200000000000, Len: 4096, Prot: ProtRead | ProtWrite, Fixed: true},
		{Line: 6, Kind: OpMmap, Addr: 0x200000001000, Len: 8192, Prot: ProtRead | ProtExec, Shared: true, NoReplace: true, Populate: true, File: "data", Off: 4096},
		{Line: 7, Kind: OpMunmap, Addr: 0x200000000000, Len: 4096},
		{Line: 8, Kind: OpMprotect, Addr: 0x200000001000, Len: 1 << 20},
		{Line: 9, Kind: OpMremap, Addr: 0x200000001000, Len: 4096, NewLen: 8192},
		{Line: 10, Kind: OpMremap, Addr: 0x200000001000, Len: 8192, NewLen: 4096, MayMove: true, NewAddr: 0x200000100000},
		{Line: 11, Kind: OpTouch, Addr: 0x200000001fff},
		{Line: 12, Kind: OpPoke, Addr: 0x200000001000, Value: 255},
		{Line: 13, Kind: OpPeek, Addr: 0x200000001000},
		{Line: 14, Kind: OpFork},
		{Line: 15, Kind: OpMaps},
		{Line: 16, Kind: OpExit},
		{Line: 17, Kind: OpMmap, Addr: 0x200000003000, Len: 4096, Prot: ProtRead, Hint: true},
	}
	if !reflect.DeepEqual(p.Ops, want) {
		t.Errorf("ops:\n got %+v\nwant %+v", p.Ops, want)
	}
	// The canonical text reads back into the same ops (lines renumbered).
	q, err := Parse(strings.NewReader(p.String()))
	if err != nil {
		t.Fatalf("canonical text does not parse: %v\n%s", err, p.String())
	}
	if q.String() != p.String() {
		t.Errorf("canonical text not stable:\n%s\n%s", p, q)
	}
}

func TestParseDefaultArena(t *testing.T) {
	t.Parallel()
	p, err := Parse(strings.NewReader("maps\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.ArenaLo != 0x100000000000 || p.ArenaHi != 0x110000000000 {
		t.Errorf("default arena %#x-%#x", p.ArenaLo, p.ArenaHi)
	}
}

// Each malformed trace is refused with the line of the
// offending op (counting every line, comments and blank ones too).
func TestParseMalformed(t *testing.T) {
	t.Parallel()
	const a = "0x100000000000"
	cases := []struct {
		name, src string
		line      int
		msg       string
	}{
		{"unknown op", "# c\n\nmunmapp " + a + " 4K\n", 3, "unknown op"},
		{"unknown flag", "mmap " + a + " 4K rw- private,fixed,huge\n", 1, "unknown mmap flag"},
		{"missing field mmap", "maps\nmmap " + a + " 4K rw-\n", 2, "missing field"},
		{"mmap name without off", "file f 4K\nmmap " + a + " 4K rw- private,fixed f\n", 2, "missing field"},
		{"extra field mmap", "file f 4K\nmmap " + a + " 4K rw- private,fixed f 0 x\n", 2, "extra field"},
		{"extra field munmap", "munmap " + a + " 4K 1\n", 1, "extra field"},
		{"missing field poke", "poke " + a + "\n", 1, "missing field"},
		{"extra field maps", "maps all\n", 1, "extra field"},
		{"maymove without fixed", "mremap " + a + " 4K 8K maymove\n", 1, "maymove needs fixed"},
		{"maymove without newaddr", "mremap " + a + " 4K 8K maymove fixed\n", 1, "maymove needs fixed"},
		{"mremap extra field", "mremap " + a + " 4K 8K maymove fixed " + a + " 1\n", 1, "extra field"},
		{"mremap missing field", "mremap " + a + " 4K\n", 1, "missing field"},
		{"fixed without maymove", "mremap " + a + " 4K 8K fixed " + a + "\n", 1, "unknown mremap flag"},
		{"neither fixed nor noreplace", "mmap " + a + " 4K rw- private\n", 1, "exactly one of fixed, noreplace or hint"},
		{"both fixed and noreplace", "mmap " + a + " 4K rw- private,fixed,noreplace\n", 1, "exactly one of fixed, noreplace or hint"},
		{"both fixed and hint", "mmap " + a + " 4K rw- private,fixed,hint\n", 1, "exactly one of fixed, noreplace or hint"},
		{"neither private nor shared", "mmap " + a + " 4K rw- fixed\n", 1, "exactly one of private or shared"},
		{"flag twice", "mmap " + a + " 4K rw- private,fixed,fixed\n", 1, "twice"},
		{"addr below arena", "touch 0xfffffffffff\n", 1, "outside the arena"},
		{"addr at arena end", "peek 0x110000000000\n", 1, "outside the arena"},
		{"range past arena", "mmap 0x10ffffffe000 16K rw- private,fixed\n", 1, "outside the arena"},
		{"mremap grow past arena", "mremap 0x10fffffff000 4K 8K\n", 1, "outside the arena"},
		{"newaddr outside arena", "mremap " + a + " 4K 4K maymove fixed 0x200000000000\n", 1, "outside the arena"},
		{"custom arena", "arena 0x200000000000 0x200000100000\nmmap " + a + " 4K rw- private,fixed\n", 2, "outside the arena"},
		{"len over 1G", "munmap " + a + " 0x40001000\n", 1, "over 1 GiB"},
		{"newlen over 1G", "mremap " + a + " 4K 2G\n", 1, "over 1 GiB"},
		{"size over 1G", "file big 1025M\n", 1, "over 1 GiB"},
		{"exit at top", "fork\nexit\nexit\n", 3, "exit with no process"},
		{"arena after op", "maps\narena 0x200000000000 0x300000000000\n", 2, "arena must come before"},
		{"arena twice", "arena 0x200000000000 0x300000000000\narena 0x200000000000 0x300000000000\n", 2, "arena must come before"},
		{"arena reversed", "arena 0x300000000000 0x200000000000\n", 1, "arena must satisfy"},
		{"bad number", "touch 0x10000000000g\n", 1, "bad number"},
		{"suffix on address", "touch 16K\n", 1, "bad number"},
		{"bad prot", "mprotect " + a + " 4K rwz\n", 1, "bad PROT"},
		{"short prot", "mprotect " + a + " 4K rw\n", 1, "bad PROT"},
		{"poke value", "poke " + a + " 256\n", 1, "over 255"},
		{"undeclared file", "mmap " + a + " 4K rw- private,fixed nofile 0\n", 1, "not declared"},
		{"file twice", "file f 4K\nfile f 8K\n", 2, "declared twice"},
		{"file path", "file a/b 4K\n", 1, "bad file NAME"},
		{"files over 1G in all", "file a 1G\nfile b 4K\n", 2, "over 1 GiB in all"},
		{"arena above 5-level paging's end", "arena 0x100000000000 0x100000000001000\n", 1, "arena must satisfy LO < HI <= 0x100000000000000"},
		{"arena over the stack zone and above", "arena 0x7ffc00000000 0x900000000000\n", 1, "over 1 GiB of 0x7ffc00000000-0x800000000000"},
		{"arena over everything", "arena 0x10000 0x800000000000\nmaps\n", 1, "own mappings (the executable and its heap)"},
		{"arena at the PIE base", "arena 0x555555554000 0x555555555000\n", 1, "the executable and its heap"},
		{"arena at the mmap base", "# c\narena 0x7ffbfff00000 0x7ffc00001000\n", 2, "the shared libraries"},
		{"arena over the stack zone", "arena 0x7ffc00000000 0x800000000000\n", 1, "over 1 GiB of 0x7ffc00000000-0x800000000000"},
		{"long line", "maps\nmaps " + strings.Repeat(" ", MaxLineLen) + "\n", 2, "line over 4096 bytes"},
		{"long line at the end", "maps\n\n" + strings.Repeat("x", 3*MaxLineLen), 3, "line over 4096 bytes"},
		{"a byte too long before a comment", "maps" + strings.Repeat(" ", MaxLineLen-3) + "#\n", 1, "line over 4096 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(c.src))
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q) = %v, want a SyntaxError", c.src, err)
			}
			if se.Line != c.line || !strings.Contains(se.Msg, c.msg) {
				t.Errorf("Parse(%q) = %q, want line %d with %q", c.src, err, c.line, c.msg)
			}
			if !strings.HasPrefix(err.Error(), strings.TrimSpace(strings.Split(err.Error(), ":")[0])+": ") {
				t.Errorf("error %q is not LINE: msg", err)
			}
		})
	}
}

// Arenas just outside the process zones, a gigabyte of the stack zone and
// the top page of the address space are allowed.
func TestParseArenaEdges(t *testing.T) {
	t.Parallel()
	for _, a := range []string{"0x10000 0x20000", "0x54fffffff000 0x550000000000", "0x660000000000 0x6f0000000000",
		"0x7fffc0000000 0x800000000000", "0x7ffffffff000 0x800000000000", "0x7ffbfffff000 0x800000000000"} {
		_, err := Parse(strings.NewReader("arena " + a + "\nmaps\n"))
		if strings.HasSuffix(a, "0x7ffbfffff000 0x800000000000") {
			if err == nil {
				t.Errorf("arena %s: no error, want the mmap zone refused", a)
			}
			continue
		}
		if err != nil {
			t.Errorf("arena %s: %v", a, err)
		}
	}
}

// A comment of any length is skipped, counting its line; the lines after it
// keep their numbers. Parse reads it in bounded memory.
func TestParseLongComment(t *testing.T) {
	src := "maps\n# " + strings.Repeat("c", 2<<20) + "\nmaps # and " + strings.Repeat("#", 1<<20) + "\nmunmapp\n"
	_, err := Parse(strings.NewReader(src))
	var se *SyntaxError
	if !errors.As(err, &se) || se.Line != 4 || !strings.Contains(se.Msg, "unknown op") {
		t.Fatalf("Parse = %v, want line 4: unknown op", err)
	}
	p, err := Parse(strings.NewReader(src[:strings.LastIndex(src, "munmapp")]))
	if err != nil || len(p.Ops) != 2 {
		t.Fatalf("Parse = %v, %v; want two maps ops", p, err)
	}
	if _, err := Parse(strings.NewReader("maps" + strings.Repeat(" ", MaxLineLen-4) + "\nmaps" + strings.Repeat(" ", MaxLineLen-4) + "#\n")); err != nil {
		t.Errorf("lines of MaxLineLen bytes: %v", err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _ = Parse(strings.NewReader(src))
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("Parse of a %d-byte trace allocated %d bytes, want under 1 MiB", len(src), n)
	}
}

// An error reading the trace is not a malformed trace: it comes back as it
// is, naming the line being read.
func TestParseReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	_, err := Parse(io.MultiReader(strings.NewReader("maps\nma"), iotest.ErrReader(boom)))
	var se *SyntaxError
	if !errors.Is(err, boom) || errors.As(err, &se) || !strings.Contains(err.Error(), "reading line 2") {
		t.Errorf("Parse = %v, want the read error of line 2", err)
	}
}

// Validate names the op of a hand-edited Program that breaks a rule by its
// line and text.
func TestValidate(t *testing.T) {
	t.Parallel()
	p, err := Parse(strings.NewReader("maps\nmmap 0x100000000000 4K rw- private,fixed\n"))
	if err != nil || p.Validate() != nil {
		t.Fatalf("Parse = %v; Validate of a parsed Program: %v", err, p.Validate())
	}
	p.Ops[1].Addr = 0x7f0000000000
	err = p.Validate()
	if err == nil || err.Error() != "invalid trace: line 2 (mmap 0x7f0000000000 4K rw- private,fixed): range 0x7f0000000000+0x1000 is outside the arena 0x100000000000-0x110000000000" {
		t.Errorf("Validate = %v", err)
	}
	p.ArenaHi = MaxUserAddrLA57 + PageSize
	if err := p.Validate(); err == nil || err.Error() != "invalid trace: arena must satisfy LO < HI <= 0x100000000000000" {
		t.Errorf("Validate = %v", err)
	}
}

// An arena may start at page 0: below mmap_min_addr the kernel answers,
// not the language. Its end follows the machine's TASK_SIZE: above 2^47
// only with 5-level paging (ValidateFor), up to 2^56; the stack zone
// stays below 2^47.
func TestArenaBoundsFollowTheMachine(t *testing.T) {
	t.Parallel()
	fourLevel := machine.Features{MmapMinAddr: 4096, LSMMmapMinAddr: 65536}
	la57 := fourLevel
	la57.LA57 = true
	for _, c := range []struct {
		src        string
		four, five string // ValidateFor's error on each machine, "" for none
	}{
		{"arena 0 0x100000\nmmap 0 4K rw- private,fixed\nmmap 0x1000 4K rw- private,hint\n", "", ""},
		{"arena 0x7fffffff0000 0x800000000000\n", "", ""},
		{"arena 0x800000000000 0x900000000000\nmmap 0x800000000000 4K rw- private,fixed\n", "ends above this machine's user address space, 0x800000000000 (4-level paging)", ""},
		{"arena 0xfffffff0000000 0x100000000000000\n", "ends above", ""},
		{"arena 0x7fffc0000000 0x800040000000\n", "ends above", ""}, // 1 GiB of the stack zone, 1 GiB above 2^47
	} {
		p, err := Parse(strings.NewReader(c.src))
		if err != nil {
			t.Errorf("Parse(%q): %v", c.src, err)
			continue
		}
		for _, m := range []struct {
			f    machine.Features
			want string
		}{{fourLevel, c.four}, {la57, c.five}} {
			err := p.ValidateFor(m.f)
			if m.want == "" && err != nil || m.want != "" && (err == nil || !strings.Contains(err.Error(), m.want)) {
				t.Errorf("%q: ValidateFor(la57 %v) = %v; want %q", c.src, m.f.LA57, err, m.want)
			}
		}
	}
}

// A trace's depends line names the features its goldens depend on; a
// setting names their values, and SettingFeatures reads them back.
func TestSetting(t *testing.T) {
	t.Parallel()
	src := []byte("# depends on: cap_sys_rawio mmap_min_addr\n  # depends on: lsm_mmap_min_addr ospke\nmaps\n")
	keys, err := Depends(src)
	if err != nil || strings.Join(keys, " ") != "ospke mmap_min_addr lsm_mmap_min_addr cap_sys_rawio" {
		t.Fatalf("Depends = %v, %v", keys, err)
	}
	host := machine.Features{MmapMinAddr: 4096, LSMMmapMinAddr: 65536, CapSysRawio: true}
	s := Setting(host, keys)
	if s != "nopku.minaddr4096.lsm65536.rawio" {
		t.Errorf("Setting = %q", s)
	}
	if f, err := SettingFeatures(s, machine.Features{OSPKE: true, LA57: true}); err != nil || f != (machine.Features{LA57: true, MmapMinAddr: 4096, LSMMmapMinAddr: 65536, CapSysRawio: true}) {
		t.Errorf("SettingFeatures(%q) = %+v, %v", s, f, err)
	}
	if _, err := Depends([]byte("# depends on: hz\n")); !errors.Is(err, ErrDepends) {
		t.Errorf("Depends of an unknown key: %v", err)
	}
	if _, err := SettingFeatures("pku.hz250", machine.Features{}); !errors.Is(err, ErrDepends) {
		t.Errorf("SettingFeatures of an unknown part: %v", err)
	}
	g, err := GoldenPath("x/f.trace", []byte("maps\n"), host)
	if err != nil || g != (Golden{Path: "x/f.golden"}) {
		t.Errorf("GoldenPath of a trace that depends on nothing = %+v, %v", g, err)
	}
}

func TestProtString(t *testing.T) {
	t.Parallel()
	for p, want := range []string{"---", "r--", "-w-", "rw-", "--x", "r-x", "-wx", "rwx"} {
		if got := Prot(p).String(); got != want {
			t.Errorf("Prot(%d) = %q, want %q", p, got, want)
		}
	}
}

func TestOutputLines(t *testing.T) {
	t.Parallel()
	if got := PeekLine(0x100000001000, 7); got != "peek 0x100000001000 7" {
		t.Errorf("PeekLine = %q", got)
	}
	if got := ErrorLine(12, "EEXIST"); got != "error 12 EEXIST" {
		t.Errorf("ErrorLine = %q", got)
	}
	if FileByte(250) != 250 || FileByte(251) != 0 || FileByte(4096) != 4096%251 {
		t.Error("FileByte is not off % 251")
	}
}

func TestNormalizeAndDiff(t *testing.T) {
	t.Parallel()
	// Lines as the live kernel prints them (padding to column 73 before the
	// name), against the same VMAs with other dev/inode values.
	live := "100000000000-100000002000 rw-p 00000000 00:00 0 \n" +
		"100000002000-100000003000 rw-s 00000000 00:01 3148                       /dev/zero (deleted)\n" +
		"100000003000-100000004000 r--p 00001000 fd:01 123456                     data\n" +
		"\n" +
		"peek 0x100000000000 0\n" +
		"error 7 SIGSEGV\n"
	model := "100000000000-100000002000 rw-p 00000000 00:00 0\n" +
		"100000002000-100000003000 rw-s 00000000 00:01 1 /dev/zero (deleted)\n" +
		"100000003000-100000004000 r--p 00001000 00:2a 9 data\n" +
		"\n" +
		"peek 0x100000000000 0\n" +
		"error 7 SIGSEGV\n"
	if d := Diff(live, model); d != "" {
		t.Errorf("equal outputs differ:\n%s\nnormalized:\n%s", d, Normalize(live))
	}
	if got := Normalize(live); !strings.Contains(got, "100000002000-100000003000 rw-s 00000000 /dev/zero (deleted)\n") {
		t.Errorf("Normalize lost the name:\n%s", got)
	}
	bad := strings.Replace(model, "r--p 00001000", "r--p 00002000", 1)
	d := Diff(live, bad)
	if !strings.Contains(d, "3 - 100000003000-100000004000 r--p 00001000 data") ||
		!strings.Contains(d, "+ 100000003000-100000004000 r--p 00002000 data") {
		t.Errorf("Diff does not show the changed line:\n%s", d)
	}
	if d := Diff("peek 0x1 1\n", "peek 0x1 1\nerror 3 EINVAL\n"); !strings.Contains(d, "+ error 3 EINVAL") {
		t.Errorf("Diff misses an extra line:\n%s", d)
	}
}

// A trace of 50 MB is refused at its op past MaxOps, with its line, having
// taken memory for MaxOps ops only.
func TestParseHugeTrace(t *testing.T) {
	src := strings.Repeat("touch 0x100000000000\n", 50<<20/21)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Parse(strings.NewReader(src))
	runtime.ReadMemStats(&after)
	var se *SyntaxError
	if !errors.As(err, &se) || se.Line != MaxOps+1 || !strings.Contains(se.Msg, "ops") {
		t.Fatalf("Parse = %v, want line %d: more than %d ops", err, MaxOps+1, MaxOps)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
		t.Errorf("Parse of a %d-byte trace allocated %d MiB, want under 64 MiB", len(src), n>>20)
	}
}
