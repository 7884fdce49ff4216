package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Every command, given bad input, says what is wrong (naming the flag and
// the value) and exits 2 for usage, 1 for a run that could not judge; it
// never reports success after doing nothing.
func TestBadInput(t *testing.T) {
	bin := mmlabBinary(t)
	dir := t.TempDir()
	empty := t.TempDir()
	notDoc := filepath.Join(dir, "x.json")
	os.WriteFile(notDoc, []byte(`{"a": 1}`), 0o644)
	for _, c := range []struct {
		args   []string
		code   int
		stderr string // a part of the message
	}{
		{[]string{}, 2, "usage: mmlab COMMAND"},
		{[]string{"bogus"}, 2, `unknown command "bogus"`},
		{[]string{"run"}, 2, "usage: mmlab run EXPERIMENT"},
		{[]string{"run", "bogus"}, 2, `unknown experiment "bogus"`},
		{[]string{"run", "trigger", "--target", "live", "--cpus", "999"}, 2, `--cpus 999`},
		{[]string{"run", "trigger", "--cpus", "0"}, 2, `--cpus 0`},
		{[]string{"run", "trigger", "--interval", "-1s"}, 2, `--interval`},
		{[]string{"run", "maptear", "--reads", "-3"}, 2, `--reads -3`},
		{[]string{"run", "maptear", "--cases", "split,bogus"}, 2, `"bogus"`},
		{[]string{"run", "maptear", "--target", "model", "--duration", "1ns"}, 1, "insufficient"},
		{[]string{"run", "mapscan", "--target", "model", "--duration", "1ns", "--runs", "1"}, 1, "insufficient"},
		{[]string{"run", "mapscan", "--runs", "0"}, 2, `--runs 0`},
		{[]string{"run", "mapscan", "--duration", "-1s"}, 2, `--duration`},
		{[]string{"run", "forkstall", "--runs", "0"}, 2, `--runs 0`},
		{[]string{"run", "forkstall", "--runs", "-1"}, 2, `--runs -1`},
		{[]string{"run", "forkstall", "--cases", "bogus"}, 2, `"bogus"`},
		{[]string{"run", "forkstall", "--modes", "bogus"}, 2, `"bogus"`},
		{[]string{"run", "forkstall", "--size", "1 G"}, 2, `--size`},
		{[]string{"run", "attach", "--n", "65"}, 2, `--n`},
		{[]string{"run", "mapslock", "--size", "1K"}, 2, `--size 1K`},
		{[]string{"run", "mapslock", "--target", "mars"}, 2, `--target "mars"`},
		{[]string{"run", "mapslock", "--variant", "middle"}, 2, `"middle"`},
		{[]string{"run", "mapslock", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"replay", "--target", "mars", "-"}, 2, `--target "mars": want model or live`},
		{[]string{"replay", filepath.Join(dir, "missing.trace"), "--target", "live"}, 1, "no such file"},
		{[]string{"replay", dir}, 1, "is a directory"},
		{[]string{"maps", "1", "--via", "bogus"}, 2, `--via "bogus": want text or query`},
		{[]string{"maps", "x"}, 2, `PID must be a positive number, not "x"`},
		{[]string{"maps", "1", "2"}, 2, "want one PID"},
		{[]string{"maps", "1", "--addr", "zz"}, 2, `--addr "zz"`},
		{[]string{"gen", "--ops", "-1"}, 2, `--ops -1`},
		{[]string{"gen", "--family", "bogus"}, 2, `--family "bogus"`},
		{[]string{"all", "--full", "--smoke"}, 2, "choose one setting"},
		{[]string{"all", "--target", "mars"}, 2, `--target "mars"`},
		{[]string{"run", "mapslock", "--target", "model", "--machine", "nosuch"}, 2, `--machine "nosuch": unknown machine: want one of host, x86-64`},
		{[]string{"run", "mapslock", "--machine", "x86-64-pku"}, 2, `--machine x86-64-pku: a named machine runs the model alone (--target model)`},
		{[]string{"all", "--machine", "nosuch"}, 2, `--machine "nosuch": unknown machine: want one of host, x86-64`},
		{[]string{"all", "--machine", "x86-64"}, 2, `--machine x86-64: a named machine runs the model alone`},
		{[]string{"replay", "--machine", "nosuch", "-"}, 2, `--machine "nosuch": unknown machine: want one of host, x86-64`},
		{[]string{"replay", "--target", "live", "--machine", "x86-64", "-"}, 2, `--machine x86-64: a named machine runs the model alone`},
		{[]string{"explore", "reg-vs-fork", "--machine", "nosuch"}, 2, `--machine "nosuch": unknown machine: want one of host, x86-64`},
		{[]string{"explore", "--replay", "f.replay", "--machine", "x86-64"}, 2, `--machine with --replay`},
		{[]string{"machines", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"report"}, 2, "no results given"},
		{[]string{"report", filepath.Join(dir, "none")}, 1, "no such file"},
		{[]string{"report", empty}, 1, "no result documents"},
		{[]string{"report", dir}, 1, "not a result document"},
		{[]string{"report", notDoc}, 1, "not a result document"},
	} {
		cmd := exec.Command(bin, c.args...)
		cmd.Dir = t.TempDir() // a usage error must leave it empty (mmlab all's default --out)
		cmd.Stdin = strings.NewReader("")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Run()
		code := cmd.ProcessState.ExitCode()
		if code != c.code || !strings.Contains(stderr.String(), c.stderr) {
			t.Errorf("mmlab %q: exit %d, stderr %q; want exit %d and %q", c.args, code, firstLines(stderr.String()), c.code, c.stderr)
		}
		if c.code == 2 && stdout.Len() > 0 {
			t.Errorf("mmlab %q: a usage error printed %q on stdout", c.args, firstLines(stdout.String()))
		}
		if left, _ := os.ReadDir(cmd.Dir); c.code == 2 && len(left) > 0 {
			t.Errorf("mmlab %q: a usage error left %s in the working directory", c.args, left[0].Name())
		}
	}
}

func firstLines(s string) string {
	if l := strings.SplitN(s, "\n", 4); len(l) > 3 {
		return strings.Join(l[:3], "\n") + "..."
	}
	return s
}
