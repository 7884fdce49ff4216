package trace

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary text to the trace parser: it never panics, and
// a trace it accepts prints canonically and parses back to the same trace.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../testdata/traces/*.trace")
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("maps\r\n\x00\n# \xff\nmmap 0xffffffffffffffff 99999999999999999999 rwx private,fixed\n"))
	for _, fam := range Families {
		f.Add([]byte(Generate(1, GenOptions{Family: fam.Name}).String()))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		p, err := Parse(bytes.NewReader(src))
		if err != nil {
			return
		}
		text := p.String()
		q, err := Parse(strings.NewReader(text))
		if err != nil {
			t.Fatalf("accepted trace prints as %q, which does not parse: %v", text, err)
		}
		if q.String() != text {
			t.Fatalf("printing is not canonical:\n%s\nthen\n%s", text, q.String())
		}
	})
}
