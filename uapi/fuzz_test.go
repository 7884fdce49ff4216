package uapi

import (
	"bytes"
	"os"
	"testing"
)

// FuzzParseLine feeds arbitrary bytes to the maps line parser: it must
// never panic, and a line it accepts must format back to a line that
// parses to the same VMA (the formatter's output is canonical).
func FuzzParseLine(f *testing.F) {
	f.Add([]byte("7f0bdafbc000-7f0bdafbe000 rw-p 00000000 00:00 0 "))
	f.Add([]byte("00400000-00401000 rwxs 00006000 103:1f 12                                 /tmp/a b\\012c (deleted)"))
	f.Add([]byte("ffffffffffffffff-0 ---- 0 0:0 0 \x00\r"))
	if b, err := os.ReadFile("/proc/self/maps"); err == nil {
		for _, l := range bytes.Split(b, []byte("\n")) {
			f.Add(l)
		}
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var v VMA
		if ParseLine(line, &v) != nil {
			return
		}
		out := bytes.TrimSuffix(v.AppendText(nil), []byte("\n"))
		var back VMA
		if err := ParseLine(out, &back); err != nil {
			t.Fatalf("%q parsed, but its formatted form %q does not: %v", line, out, err)
		}
		if again := bytes.TrimSuffix(back.AppendText(nil), []byte("\n")); !bytes.Equal(again, out) {
			t.Fatalf("formatting is not canonical: %q then %q", out, again)
		}
	})
}
