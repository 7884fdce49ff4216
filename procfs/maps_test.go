package procfs

import (
	"strings"
	"testing"

	"mmlab/machine"
	"mmlab/mm"
)

// TestMapsFormat checks the format rules of show_map_vma on a model address
// space: anonymous lines end in "0 " (inode 0 and the trailing space of the
// prefix, no padding), named lines pad the prefix to 73 columns and put the
// name after one more space, shared mappings show 's', file offsets are
// pgoff<<12 and anonymous ones 0.
func TestMapsFormat(t *testing.T) {
	t.Parallel()
	m := mm.New(new(mm.Namespace), machine.MustNamed("x86-64").Features)
	const a = 0x100000000000
	if _, err := m.Mmap(nil, a, 8192, mm.PROT_READ|mm.PROT_WRITE, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED, nil, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Mmap(nil, a+0x10000, 4096, mm.PROT_READ, mm.MAP_SHARED|mm.MAP_ANONYMOUS|mm.MAP_FIXED, nil, 0); err != nil {
		t.Fatal(err)
	}
	f := mm.Open(mm.NewInode(new(mm.Namespace), "f", 8192, nil))
	if _, err := m.Mmap(nil, a+0x20000, 4096, mm.PROT_READ|mm.PROT_EXEC, mm.MAP_PRIVATE|mm.MAP_FIXED, f, 4096); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(Maps(m), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines: %q", len(lines), lines)
	}
	if want := "100000000000-100000002000 rw-p 00000000 00:00 0 "; lines[0] != want {
		t.Errorf("anon line %q, want %q", lines[0], want)
	}
	for i, name := range []string{"/dev/zero (deleted)", "f"} {
		l := lines[i+1]
		if len(l) < 74 || l[72] != ' ' || l[73:] != name || strings.TrimRight(l[:73], " ") == l[:73] {
			t.Errorf("line %q: name %q not at column 74 after padding", l, name)
		}
	}
	if !strings.HasPrefix(lines[1], "100000010000-100000011000 r--s 00000000 00:00 ") {
		t.Errorf("shared anon line %q", lines[1])
	}
	if !strings.HasPrefix(lines[2], "100000020000-100000021000 r-xp 00001000 00:00 ") {
		t.Errorf("file line %q", lines[2])
	}
}
