package uapi

import "testing"

func TestAppendJSON(t *testing.T) {
	v := VMA{Start: 0x400000, End: 0x401000, Flags: PROCMAP_QUERY_VMA_READABLE | PROCMAP_QUERY_VMA_EXECUTABLE,
		Offset: 0x2000, DevMajor: 254, DevMinor: 1, Inode: 12, Name: []byte("/bin/a \"b\"")}
	want := `{"vma_start":"0x400000","vma_end":"0x401000","perms":"r-xp","vma_offset":"0x2000","dev_major":254,"dev_minor":1,"inode":12,"name":"/bin/a \"b\""}` + "\n"
	if got := string(v.AppendJSON(nil)); got != want {
		t.Errorf("AppendJSON =\n%s\nwant\n%s", got, want)
	}
	anon := VMA{Start: 0x1000, End: 0x2000, PageSize: 4096}
	want = `{"vma_start":"0x1000","vma_end":"0x2000","perms":"---p","vma_offset":"0x0","dev_major":0,"dev_minor":0,"inode":0,"vma_page_size":4096,"name":null}` + "\n"
	if got := string(anon.AppendJSON([]byte("x"))); got != "x"+want {
		t.Errorf("AppendJSON of an anonymous VMA = %s", got)
	}
}
