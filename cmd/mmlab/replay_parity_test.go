package main

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"mmlab/machine"
)

// Every malformed or refused trace, and every odd input, gets the same exit
// status, stdout and stderr, byte for byte, from `mmlab replay --target
// model` and `--target live`: the targets refuse the same traces, before
// anything runs.
func TestReplayTargetsRefuseAlike(t *testing.T) {
	dir := t.TempDir()
	const a = "0x100000000000"
	long := strings.Repeat("c", 2<<20)
	cases := []struct {
		name  string
		path  string // TRACE; "-" reads src from stdin
		src   string
		code  int
		runs  bool // the trace runs: the live target needs Linux
		start string
	}{
		{"arena over the process", "-", "arena 0x1000 0x800000000000\nmaps\n", 2, false, "1: arena overlaps 0x550000000000-0x660000000000"},
		{"arena above 5-level paging", "-", "arena 0x1000 0x100000000001000\nmaps\n", 2, false, "1: arena must satisfy LO < HI <= 0x100000000000000"},
		{"arena over the executable", "-", "arena 0x10000 0x800000000000\nmaps\n", 2, false, "1: arena overlaps 0x550000000000-0x660000000000"},
		{"arena over the libraries", "-", "arena 0x7f0000000000 0x7f0000001000\nmaps\n", 2, false, "1: arena overlaps 0x6f0000000000-0x7ffc00000000"},
		{"arena over the stack zone", "-", "arena 0x7ffbc0000000 0x800000000000\n", 2, false, "1: arena overlaps"},
		{"arena over 1G of the stack zone", "-", "arena 0x7ffe00000000 0x800000000000\n", 2, false, "1: arena holds over 1 GiB"},
		{"arena after an op", "-", "maps\narena 0x200000000000 0x300000000000\n", 2, false, "2: arena must come before"},
		{"unknown op", "-", "# c\n\nmunmapp " + a + " 4K\n", 2, false, "3: unknown op"},
		{"unknown flag", "-", "mmap " + a + " 4K rw- private,fixed,huge\n", 2, false, "1: unknown mmap flag"},
		{"missing field", "-", "maps\nmmap " + a + " 4K rw-\n", 2, false, "2: missing field"},
		{"extra field", "-", "maps all\n", 2, false, "1: extra field"},
		{"maymove without fixed", "-", "mremap " + a + " 4K 8K maymove\n", 2, false, "1: maymove needs fixed"},
		{"neither fixed nor noreplace", "-", "mmap " + a + " 4K rw- private\n", 2, false, "1: FLAGS"},
		{"outside the arena", "-", "touch 0xfffffffffff\n", 2, false, "1: address"},
		{"past the arena", "-", "mremap 0x10fffffff000 4K 8K\n", 2, false, "1: new range"},
		{"len over 1G", "-", "munmap " + a + " 0x40001000\n", 2, false, "1: LEN"},
		{"files over 1G in all", "-", "file a 512M\nfile b 512M\nfile c 4K\n", 2, false, "3: the files take over 1 GiB"},
		{"exit at the top", "-", "fork\nexit\nexit\n", 2, false, "3: exit with no process"},
		{"undeclared file", "-", "mmap " + a + " 4K rw- private,fixed nofile 0\n", 2, false, "1: file \"nofile\" is not declared"},
		{"file twice", "-", "file f 4K\nfile f 8K\n", 2, false, "2: file \"f\" declared twice"},
		{"file path", "-", "file ../f 4K\n", 2, false, "1: bad file NAME"},
		{"poke value", "-", "poke " + a + " 256\n", 2, false, "1: VALUE"},
		{"bad number", "-", "touch 0x10000000000g\n", 2, false, "1: ADDR: bad number"},
		{"binary", "-", "\x00\xff\xfe\n", 2, false, "1: unknown op"},
		{"long op line", "-", "maps\nmaps" + strings.Repeat(" ", 5000) + "x\n", 2, false, "2: line over 4096 bytes"},
		{"long line, no newline", "-", "maps\n" + long, 2, false, "2: line over 4096 bytes"},
		{"long comment after a bad op", "-", "maps\n#" + long + "\nmaps x\n", 2, false, "3: extra field"},
		{"directory", dir, "", 1, false, "mmlab replay: reading line 1: read " + dir + ": is a directory"},
		{"missing file", filepath.Join(dir, "missing.trace"), "", 1, false, "mmlab replay: open " + dir + "/missing.trace: no such file"},
		{"no trace", "", "", 2, false, "usage: mmlab replay"},
		{"a 2 MiB comment", "-", "#" + long + "\nmaps\n", 0, true, ""},
		{"a 2 MiB comment after an op", "-", "maps # " + long + "\nmaps\n", 0, true, ""},
		{"empty", "-", "", 0, true, ""},
		{"CRLF", "-", "maps\r\nmaps\r\n", 0, true, ""},
		{"top page", "-", "arena 0x7ffffffff000 0x800000000000\nmmap 0x7ffffffff000 4K rw- private,fixed\nmaps\n", 0, true, ""},
	}
	if !machine.Host().Features.LA57 {
		cases = append(cases, struct {
			name, path, src string
			code            int
			runs            bool
			start           string
		}{"arena above 2^47 without la57", "-", "arena 0x800000000000 0x800000001000\nmaps\n", 2, false,
			"invalid trace: arena 0x800000000000-0x800000001000 ends above this machine's user address space, 0x800000000000 (4-level paging)"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.runs && runtime.GOOS != "linux" {
				t.Skip("the live target needs Linux")
			}
			run := func(target string) (int, string, string) {
				args := []string{"--target", target}
				if c.path != "" {
					args = append(args, c.path)
				}
				var out, errb bytes.Buffer
				code := runReplay(context.Background(), args, strings.NewReader(c.src), &out, &errb)
				return code, out.String(), errb.String()
			}
			mc, mout, merr := run("model")
			lc, lout, lerr := run("live")
			if mc != lc || mout != lout || merr != lerr {
				t.Fatalf("model: exit %d, stdout %.200q, stderr %.200q\n live: exit %d, stdout %.200q, stderr %.200q", mc, mout, merr, lc, lout, lerr)
			}
			if mc != c.code || !strings.HasPrefix(merr, c.start) || (c.runs && merr != "") {
				t.Errorf("exit %d, stderr %.300q; want exit %d, stderr starting %q", mc, merr, c.code, c.start)
			}
			if !c.runs && mout != "" {
				t.Errorf("a refused trace printed %q", mout)
			}
		})
	}
}
