package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mmlab/live"
)

func TestCalibrateUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
		{[]string{"--runs", "0"}, 2, "--runs 0"},
		{[]string{"--nosuch"}, 2, "nosuch"},
		{[]string{"--help"}, 0, "mmlab/host.json"},
	} {
		var out, errb bytes.Buffer
		if code := calibrateMain(context.Background(), c.args, &out, &errb); code != c.code || !strings.Contains(errb.String(), c.want) {
			t.Errorf("calibrate %v: exit %d, stderr %q; want %d and %q", c.args, code, errb.String(), c.code, c.want)
		}
	}
}

// An interrupted calibrate writes nothing and exits 130; not as root it
// says why it cannot run and exits 1.
func TestCalibrateInterrupted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.json")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	code := calibrateMain(ctx, []string{"--out", path}, &out, &errb)
	want, msg := 130, "interrupted"
	if !live.IsRoot() {
		want, msg = 1, "needs root"
	}
	if code != want || !strings.Contains(errb.String(), msg) {
		t.Errorf("exit %d, stderr %q; want %d and %q", code, errb.String(), want, msg)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s exists after an interrupted calibrate (%v)", path, err)
	}
}
