package uapi

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// Lines in the show_map_vma format. Each must parse and format back to
// itself; the expected fields follow from reading the line.
func TestParseFormatRoundTrip(t *testing.T) {
	pad := func(h, name string) string { return h + strings.Repeat(" ", nameColumn-len(h)) + " " + name }
	cases := []struct {
		line string
		want VMA
	}{
		{pad("55ebea368000-55ebea36a000 r--p 00000000 fe:00 247278 ", "/usr/bin/head"),
			VMA{Start: 0x55ebea368000, End: 0x55ebea36a000, Flags: PROCMAP_QUERY_VMA_READABLE, DevMajor: 0xfe, Inode: 247278, Name: []byte("/usr/bin/head")}},
		{"7f0bdafbc000-7f0bdafbe000 rw-p 00000000 00:00 0 ",
			VMA{Start: 0x7f0bdafbc000, End: 0x7f0bdafbe000, Flags: PROCMAP_QUERY_VMA_READABLE | PROCMAP_QUERY_VMA_WRITABLE}},
		{pad("ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 ", "[vsyscall]"),
			VMA{Start: 0xffffffffff600000, End: 0xffffffffff601000, Flags: PROCMAP_QUERY_VMA_EXECUTABLE, Name: []byte("[vsyscall]")}},
		{pad("00400000-00401000 rwxs 00006000 103:1f 12 ", "/tmp/a b\\012c (deleted)"),
			VMA{Start: 0x400000, End: 0x401000, Flags: 0xf, Offset: 0x6000, DevMajor: 0x103, DevMinor: 0x1f, Inode: 12, Name: []byte("/tmp/a b\\012c (deleted)")}},
		// A name that starts with spaces survives: only the padding is cut.
		{pad("00400000-00401000 ---p 00000000 00:00 0 ", "  x"),
			VMA{Start: 0x400000, End: 0x401000, Name: []byte("  x")}},
		// A header of 72 columns or more is not padded: one space, then the name.
		{"7f0bdafbc000-7f0bdafbe000 r--s 123456789abcdef0 fff:fffff 18446744073709551615  /x",
			VMA{Start: 0x7f0bdafbc000, End: 0x7f0bdafbe000, Flags: PROCMAP_QUERY_VMA_READABLE | PROCMAP_QUERY_VMA_SHARED, Offset: 0x123456789abcdef0, DevMajor: 0xfff, DevMinor: 0xfffff, Inode: 18446744073709551615, Name: []byte("/x")}},
		// An empty name is not no name.
		{pad("00400000-00401000 ---p 00000000 00:00 0 ", ""),
			VMA{Start: 0x400000, End: 0x401000, Name: []byte{}}},
	}
	for _, c := range cases {
		var v VMA
		if err := ParseLine([]byte(c.line), &v); err != nil {
			t.Errorf("parse %q: %v", c.line, err)
			continue
		}
		if v.Start != c.want.Start || v.End != c.want.End || v.Flags != c.want.Flags || v.Offset != c.want.Offset ||
			v.DevMajor != c.want.DevMajor || v.DevMinor != c.want.DevMinor || v.Inode != c.want.Inode ||
			string(v.Name) != string(c.want.Name) || (v.Name == nil) != (c.want.Name == nil) {
			t.Errorf("parse %q:\n got %+v\nwant %+v", c.line, v, c.want)
		}
		if got := string(v.AppendText(nil)); got != c.line+"\n" {
			t.Errorf("AppendText:\n got %q\nwant %q", got, c.line+"\n")
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, line := range []string{
		"",
		"00400000 00401000 r--p 00000000 00:00 0 ",
		"00400000-00401000 r--q 00000000 00:00 0 ",
		"00400000-00401000 r--p 00000000 00-00 0 ",
		"00400000-00401000 r--p 0000000g 00:00 0 ",
		"00400000-00401000 r--p 00000000 00:00 0",
		"00400000-00401000 r--p 00000000 00:00 0 x",                                // name inside the padding
		"00400000-00401000 r--p 00000000 00:00 0 " + strings.Repeat(" ", 31) + "x", // padding one short
		"10000000000000000-1 r--p 00000000 00:00 0 ",                               // 17 hex digits
	} {
		var v VMA
		if err := ParseLine([]byte(line), &v); err == nil {
			t.Errorf("parse %q: no error, got %+v", line, v)
		}
	}
}

func TestEscapeName(t *testing.T) {
	if got := string(EscapeName(nil, []byte("/a\nb\n"))); got != `/a\012b\012` {
		t.Errorf("EscapeName = %q", got)
	}
	if p := Perm(PROCMAP_QUERY_VMA_READABLE | PROCMAP_QUERY_VMA_EXECUTABLE); p.String() != "r-xp" {
		t.Errorf("Perm.String = %q", p.String())
	}
}

// BenchmarkParseLine is the parser's share of a Walk, per line.
func BenchmarkParseLine(b *testing.B) {
	line := []byte("7f0bdafbc000-7f0bdafbe000 rw-p 00033000 fe:00 325835                     /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
	var v VMA
	for b.Loop() {
		if err := ParseLine(line, &v); err != nil {
			b.Fatal(err)
		}
	}
}

// hexRef is the plain parse the eight-at-a-time hex must agree with.
func hexRef(b []byte, sep byte) (uint64, int, bool) {
	var x uint64
	i := 0
	for ; i < len(b) && hexVal[b[i]] < 16; i++ {
		x = x<<4 | uint64(hexVal[b[i]])
	}
	if i == 0 || i > 16 || i == len(b) || b[i] != sep {
		return 0, 0, false
	}
	return x, i + 1, true
}

// Random fields of 0 to 20 characters from an alphabet of hex digits, the
// characters next to them in ASCII, upper case, separators and bytes >= 0x80,
// at every offset of a buffer: the fast parse equals the plain one.
func TestHexMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("0123456789abcdef0123456789abcdef/:`gAF- \x80\xff")
	for n := 0; n < 200000; n++ {
		b := make([]byte, rng.IntN(24))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		sep := []byte{'-', ' ', ':'}[rng.IntN(3)]
		want, wantI, ok := hexRef(b, sep)
		p := lineParser{b: b}
		got := p.hex(sep)
		if p.bad == ok || got != want || (ok && p.i != wantI) {
			t.Fatalf("hex(%q, %q) = %#x at %d (bad %v), want %#x at %d (ok %v)", b, sep, got, p.i, p.bad, want, wantI, ok)
		}
	}
}
