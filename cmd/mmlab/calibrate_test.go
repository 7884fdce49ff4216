package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mmlab/live"
	"mmlab/machine"
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

// mmlab machines lists each named description's costs with their sources,
// and for the host the calibrated file or what to run to make one.
func TestMachinesCosts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.json")
	t.Setenv(machine.HostFileEnv, path)
	var out, errb bytes.Buffer
	if code := machinesMain(nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	blocks := strings.Split(out.String(), "\n\n")
	if !strings.Contains(blocks[0], "mmlab calibrate") || !strings.Contains(blocks[0], path) {
		t.Errorf("the host's block does not say how to calibrate: %q", blocks[0])
	}
	for i, name := range machine.Names()[1:] {
		d := machine.MustNamed(name)
		d.Costs.Each(func(cost string, c *machine.Cost) {
			if want := fmt.Sprintf("%-15s %8.1f  %s\n", cost, c.NS, c.Source); !strings.Contains(blocks[i+1]+"\n", want) {
				t.Errorf("%s: no line %q", name, want)
			}
		})
		if !strings.Contains(blocks[i+1], fmt.Sprintf("= %d CPUs", d.Topology.CPUs)) {
			t.Errorf("%s: no topology: %q", name, blocks[i+1])
		}
	}
}
