package main

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
)

// The exit statuses and messages of mmlab replay: 2 and "LINE: msg" for a
// malformed trace, 2 for bad usage, 1 for an unreadable trace, 0 when the
// trace ran even though ops failed.
func TestReplayExitStatus(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		stdin  string
		code   int
		stderr string
	}{
		{"malformed", []string{"--target", "live", "-"}, "maps\n\nmmap 0x100000000000 4K rw- private\n", 2, "3: FLAGS \"private\": need exactly one of fixed, noreplace or hint\n"},
		{"malformed model", []string{"-"}, "fork\nexit\nexit\n", 2, "3: exit with no process to return to\n"},
		{"no trace", []string{"--target", "live"}, "", 2, "usage: mmlab replay"},
		{"bad target", []string{"--target", "qemu", "-"}, "", 2, `--target "qemu": want model or live`},
		{"unreadable", []string{"--target", "live", "/nonexistent/x.trace"}, "", 1, "no such file or directory"},
		{"help", []string{"--help"}, "", 0, "poke ADDR VALUE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := runReplay(context.Background(), c.args, strings.NewReader(c.stdin), &out, &errb)
			if code != c.code || !strings.Contains(errb.String(), c.stderr) {
				t.Errorf("exit %d, stderr %q; want exit %d, stderr containing %q", code, errb.String(), c.code, c.stderr)
			}
			if c.code == 2 && c.stdin != "" && !strings.HasPrefix(errb.String(), c.stderr) {
				t.Errorf("stderr %q is not exactly LINE: msg", errb.String())
			}
			if out.Len() != 0 {
				t.Errorf("stdout %q, want nothing", out.String())
			}
		})
	}
}

func TestReplayLiveRuns(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("live replay needs Linux")
	}
	var out, errb bytes.Buffer
	src := "mmap 0x100000000000 4K r-- private,fixed\npoke 0x100000000000 1\nmunmap 0x100000000010 4K\npeek 0x100000000000\n"
	code := runReplay(context.Background(), []string{"--target", "live", "-"}, strings.NewReader(src), &out, &errb)
	// A store to a read-only page raises SIGSEGV (SEGV_ACCERR); munmap of
	// an unaligned address fails EINVAL; the page reads as zero.
	want := "error 2 SIGSEGV SEGV_ACCERR\nerror 3 EINVAL\npeek 0x100000000000 0\n"
	if code != 0 || out.String() != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 0 and %q", code, out.String(), errb.String(), want)
	}
}
