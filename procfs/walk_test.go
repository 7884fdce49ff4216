package procfs

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"mmlab/design"
	"mmlab/errno"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/uapi"
)

const walkArena = 0x200000000

var variants = []Variant{Before, After}

// pieces maps n anonymous VMAs of 3 pages, alternating rw and r, at base.
func pieces(t testing.TB, m *mm.MM, base uint64, n int) {
	t.Helper()
	for i := range n {
		prot := mm.PROT_READ | mm.PROT_WRITE
		if i%2 == 1 {
			prot = mm.PROT_READ
		}
		if _, err := m.Mmap(nil, base+uint64(i)*3*4096, 3*4096, prot, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// piecesMM returns an x86-64 address space with n pieces at walkArena.
func piecesMM(t testing.TB, n int) *mm.MM {
	t.Helper()
	m := mm.New(new(mm.Namespace), machine.MustNamed("x86-64").Features)
	pieces(t, m, walkArena, n)
	return m
}

// Both walks give the text of the one-chunk walk, in chunks of whole lines
// of at most ChunkSize bytes.
func TestWalksMatchMaps(t *testing.T) {
	t.Parallel()
	m := piecesMM(t, 300)
	f := mm.Open(mm.NewInode(new(mm.Namespace), "/usr/lib/libmodel.so", 8*4096, nil))
	if _, err := m.Mmap(nil, 0x7f0000000000, 4*4096, mm.PROT_READ|mm.PROT_EXEC, mm.MAP_PRIVATE, f, 4096); err != nil {
		t.Fatal(err)
	}
	want := Maps(m)
	for _, v := range variants {
		mf := mustOpenMaps(m, Options{Variant: v})
		var all []byte
		chunks := 0
		for {
			b, err := mf.Read()
			if err != nil {
				t.Fatal(err)
			}
			if len(b) == 0 {
				break
			}
			chunks++
			if len(b) > ChunkSize || b[len(b)-1] != '\n' {
				t.Fatalf("%s: chunk %d: %d bytes, ends %q", v, chunks, len(b), b[len(b)-1])
			}
			all = append(all, b...)
		}
		if string(all) != want {
			t.Fatalf("%s: text differs from Maps", v)
		}
		// 301 lines of 43 or 94 bytes: 4096-byte chunks need 4 reads.
		if chunks != (len(want)+ChunkSize-1)/ChunkSize && chunks != (len(want)+ChunkSize-1)/ChunkSize+1 {
			t.Fatalf("%s: %d chunks for %d bytes", v, chunks, len(want))
		}
		if again, _ := mf.ReadAll(nil); string(again) != want {
			t.Fatalf("%s: ReadAll after rewind differs", v)
		}
	}
}

// A VMA that grows across the chunk boundary between two reads is shown
// again at the start of the next chunk (the resume position is the end of
// the last VMA shown); one that is unmapped between reads is simply gone.
// Both walks behave the same.
func TestResumeShowsGrownVMATwice(t *testing.T) {
	t.Parallel()
	for _, v := range variants {
		m := piecesMM(t, 200)
		mf := mustOpenMaps(m, Options{Variant: v})
		c1, err := mf.Read()
		if err != nil {
			t.Fatal(err)
		}
		c1 = bytes.Clone(c1)
		lines := strings.Split(strings.TrimSuffix(string(c1), "\n"), "\n")
		var last uapi.VMA
		if err := uapi.ParseLine([]byte(lines[len(lines)-1]), &last); err != nil {
			t.Fatal(err)
		}
		// Give the next piece the last one's protection: they merge.
		prot := mm.PROT_READ
		if last.Flags&uapi.PROCMAP_QUERY_VMA_WRITABLE != 0 {
			prot |= mm.PROT_WRITE
		}
		if err := m.Mprotect(nil, last.End, 3*4096, prot); err != nil {
			t.Fatal(err)
		}
		c2, err := mf.Read()
		if err != nil {
			t.Fatal(err)
		}
		var first uapi.VMA
		if err := uapi.ParseLine(c2[:bytes.IndexByte(c2, '\n')], &first); err != nil {
			t.Fatal(err)
		}
		// The next piece now matches both neighbours: all three merge.
		if first.Start != last.Start || first.End != last.End+6*4096 {
			t.Fatalf("%s: after the merge the next chunk starts with %#x-%#x, want the grown %#x-%#x again",
				v, first.Start, first.End, last.Start, last.End+6*4096)
		}
	}
}

func query(t *testing.T, mf *MapsFile, addr, flags uint64, nameSize int) (uapi.ProcmapQuery, string, error) {
	t.Helper()
	q := uapi.ProcmapQuery{Size: uapi.SizeofProcmapQuery, QueryFlags: flags, QueryAddr: addr}
	var name []byte
	if nameSize > 0 {
		name = make([]byte, nameSize)
		q.VMANameSize, q.VMANameAddr = uint32(nameSize), 1
	}
	err := mf.Query(&q, name, nil)
	nm := ""
	if err == nil && q.VMANameSize > 0 {
		nm = string(name[:q.VMANameSize-1])
	}
	return q, nm, err
}

// PROCMAP_QUERY's semantics on a small layout, under both designs; the
// expected values follow the rules of do_procmap_query
// (fs/proc/task_mmu.c), checked against the live kernel in
// query_linux_test.go.
func TestQuerySemantics(t *testing.T) {
	t.Parallel()
	m := mm.New(new(mm.Namespace), machine.MustNamed("x86-64").Features)
	const a = 0x7f0000000000
	in := mm.NewInode(new(mm.Namespace), "/opt/model/libx.so", 16*4096, nil)
	in.BuildID = []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}
	mustMap := func(addr, n uint64, prot, flags int, f *mm.File, off uint64) {
		if _, err := m.Mmap(nil, addr, n*4096, prot, flags|mm.MAP_FIXED, f, off); err != nil {
			t.Fatal(err)
		}
	}
	mustMap(a, 2, mm.PROT_READ|mm.PROT_WRITE, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS, nil, 0)       // [a, a+2P) rw-p
	mustMap(a+4*4096, 2, mm.PROT_READ|mm.PROT_EXEC, mm.MAP_PRIVATE, mm.Open(in), 2*4096)     // [a+4P, a+6P) r-xp file @2P
	mustMap(a+8*4096, 1, mm.PROT_READ|mm.PROT_WRITE, mm.MAP_SHARED|mm.MAP_ANONYMOUS, nil, 0) // [a+8P, a+9P) rw-s
	const R, W, X, S = uapi.PROCMAP_QUERY_VMA_READABLE, uapi.PROCMAP_QUERY_VMA_WRITABLE, uapi.PROCMAP_QUERY_VMA_EXECUTABLE, uapi.PROCMAP_QUERY_VMA_SHARED
	const NEXT, FILE = uapi.PROCMAP_QUERY_COVERING_OR_NEXT_VMA, uapi.PROCMAP_QUERY_FILE_BACKED_VMA
	cases := []struct {
		addr, flags uint64
		start       uint64 // 0: ENOENT expected
		vflags      uint64
		name        string
	}{
		{a + 4096, 0, a, R | W, ""},
		{a + 2*4096, 0, 0, 0, ""}, // in the hole
		{a + 2*4096, NEXT, a + 4*4096, R | X, "/opt/model/libx.so"},
		{a, FILE | NEXT, a + 4*4096, R | X, "/opt/model/libx.so"},
		{a, FILE, 0, 0, ""}, // covering VMA not file-backed
		{a, W | NEXT, a, R | W, ""},
		{a + 4*4096, W | NEXT, a + 8*4096, R | W | S, "/dev/zero (deleted)"},
		{a, S | NEXT, a + 8*4096, R | W | S, "/dev/zero (deleted)"},
		{a + 4*4096, X, a + 4*4096, R | X, "/opt/model/libx.so"},
		{a + 9*4096, NEXT, 0, 0, ""}, // nothing above
	}
	for _, v := range variants {
		mf := mustOpenMaps(m, Options{Variant: v})
		for _, c := range cases {
			q, nm, err := query(t, mf, c.addr, c.flags, 256)
			if c.start == 0 {
				if !errors.Is(err, errno.ENOENT) {
					t.Errorf("%s: query %#x flags %#x: %v, want ENOENT", v, c.addr, c.flags, err)
				}
				continue
			}
			if err != nil || q.VMAStart != c.start || q.VMAFlags != c.vflags || nm != c.name {
				t.Errorf("%s: query %#x flags %#x: %#x %#x %q %v; want %#x %#x %q", v, c.addr, c.flags, q.VMAStart, q.VMAFlags, nm, err, c.start, c.vflags, c.name)
			}
		}
		q, _, _ := query(t, mf, a+5*4096, 0, 0)
		if q.VMAOffset != 2*4096 || q.Inode != in.Ino || q.VMAPageSize != 4096 || q.VMANameSize != 0 {
			t.Errorf("%s: file VMA fields %+v", v, q)
		}
		// Name buffer one byte short (the NUL does not fit): ENAMETOOLONG.
		if _, _, err := query(t, mf, a+4*4096, 0, len("/opt/model/libx.so")); !errors.Is(err, errno.ENAMETOOLONG) {
			t.Errorf("%s: short name buffer: %v, want ENAMETOOLONG", v, err)
		}
		// Build ID: 20 bytes; a 19-byte buffer is too small; none for anon.
		bid := make([]byte, 20)
		q = uapi.ProcmapQuery{Size: uapi.SizeofProcmapQuery, QueryAddr: a + 4*4096, BuildIDSize: 20, BuildIDAddr: 1}
		if err := mf.Query(&q, nil, bid); err != nil || q.BuildIDSize != 20 || bid[19] != 20 {
			t.Errorf("%s: build ID: %v size %d %v", v, err, q.BuildIDSize, bid)
		}
		q = uapi.ProcmapQuery{Size: uapi.SizeofProcmapQuery, QueryAddr: a + 4*4096, BuildIDSize: 19, BuildIDAddr: 1}
		if err := mf.Query(&q, nil, bid); !errors.Is(err, errno.ENAMETOOLONG) {
			t.Errorf("%s: short build ID buffer: %v, want ENAMETOOLONG", v, err)
		}
		q = uapi.ProcmapQuery{Size: uapi.SizeofProcmapQuery, QueryAddr: a, BuildIDSize: 20, BuildIDAddr: 1}
		if err := mf.Query(&q, nil, bid); err != nil || q.BuildIDSize != 0 {
			t.Errorf("%s: build ID of anon memory: %v size %d, want success and 0", v, err, q.BuildIDSize)
		}
		// Argument errors.
		for _, bad := range []struct {
			q    uapi.ProcmapQuery
			want errno.Errno
		}{
			{uapi.ProcmapQuery{Size: 4097, QueryAddr: a}, errno.E2BIG},
			{uapi.ProcmapQuery{Size: 23, QueryAddr: a}, errno.EINVAL},
			{uapi.ProcmapQuery{Size: 104, QueryAddr: a, QueryFlags: 0x40}, errno.EINVAL},
			{uapi.ProcmapQuery{Size: 104, QueryAddr: a, VMANameSize: 10}, errno.EINVAL},
			{uapi.ProcmapQuery{Size: 104, QueryAddr: a, BuildIDAddr: 1}, errno.EINVAL},
		} {
			q := bad.q
			if err := mf.Query(&q, nil, nil); !errors.Is(err, bad.want) {
				t.Errorf("%s: %+v: %v, want %v", v, bad.q, err, bad.want)
			}
		}
		// A caller's struct ending at query_addr (24 bytes) gets no output.
		q = uapi.ProcmapQuery{Size: 24, QueryAddr: a, VMAStart: 7}
		if err := mf.Query(&q, nil, nil); err != nil || q.VMAStart != 7 {
			t.Errorf("%s: 24-byte struct: %v, vma_start %#x (want untouched 7)", v, err, q.VMAStart)
		}
	}
}

// Each variant's name parses back to it; the zero variant is no variant,
// and OpenMaps refuses it.
func TestVariants(t *testing.T) {
	t.Parallel()
	for _, name := range Variants.Names() {
		v, err := Variants.Parse(name)
		if err != nil || v.String() != name {
			t.Errorf("%q: %v, %v", name, v, err)
		}
	}
	if v, _ := Variants.Parse("before"); v != Before {
		t.Errorf("before is %v", v)
	}
	if _, err := Variants.Parse("Before"); !errors.Is(err, design.ErrUnknown) {
		t.Errorf("Before: %v", err)
	}
	if _, err := OpenMaps(mm.New(new(mm.Namespace), machine.MustNamed("x86-64").Features), Options{}); !errors.Is(err, design.ErrUnset) {
		t.Errorf("OpenMaps with no variant: %v, want design.ErrUnset", err)
	}
}

// mustOpenMaps is OpenMaps for a test's opt, whose variant is set.
func mustOpenMaps(m *mm.MM, opt Options) *MapsFile {
	f, err := OpenMaps(m, opt)
	if err != nil {
		panic(err)
	}
	return f
}
