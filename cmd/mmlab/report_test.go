package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"mmlab/experiment"
	"mmlab/experiment/mapslock"
	"mmlab/experiment/redzone"
	"mmlab/machine"
	"mmlab/report"
)

// runMmlab runs the command in a directory of its own and returns its exit
// status, stdout and stderr.
func runMmlab(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(mmlabBinary(t), args...)
	cmd.Dir = t.TempDir()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Run()
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// A directory of good documents builds its report; one bad document among
// them is named and no report is written, unless --skip-bad, which builds
// it from the rest.
func TestReportSkipBad(t *testing.T) {
	dir := t.TempDir()
	lock := report.NewDocument[*mapslock.Options, mapslock.Result]("mapslock", machine.MustNamed("x86-64"), &mapslock.Options{Runs: 1, Size: 1 << 30})
	lock.Results = append(lock.Results, mapslock.Result{Row: experiment.LiveRow, Case: mapslock.CaseOther, HoldMs: 20, First: 1, Probed: 1})
	rz := report.NewDocument[*redzone.Options, redzone.Result]("redzone", machine.MustNamed("x86-64"), redzone.NewOptions())
	for _, err := range []error{lock.Save(dir), rz.Save(dir)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	if code, stdout, stderr := runMmlab(t, "report", dir, "-o", out); code != 0 || !strings.Contains(stdout, "(1 host(s))") {
		t.Fatalf("good documents: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	bad := filepath.Join(dir, "newer.json")
	if err := os.WriteFile(bad, []byte(`{"schema_version": 99, "experiment": "mapslock"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	msg := bad + ": schema_version: newer than this mmlab reads: got 99, want 1 to 3"
	out = t.TempDir()
	code, _, stderr := runMmlab(t, "report", dir, "-o", out)
	if code != 1 || !strings.Contains(stderr, msg) || !strings.Contains(stderr, "--skip-bad") {
		t.Errorf("one bad document: exit %d, stderr %q; want 1 and %q", code, stderr, msg)
	}
	if _, err := os.Stat(filepath.Join(out, "index.html")); err == nil {
		t.Error("one bad document: a report was written")
	}

	code, stdout, stderr := runMmlab(t, "report", "--skip-bad", dir, "-o", out)
	if code != 0 || !strings.Contains(stderr, msg) || !strings.Contains(stdout, "1 refused document(s) left out") {
		t.Fatalf("--skip-bad: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	page, err := os.ReadFile(filepath.Join(out, "index.html"))
	if err != nil || !bytes.Contains(page, []byte("the discriminating probe")) {
		t.Errorf("--skip-bad: the report lacks the part of the good mapslock document (%v)", err)
	}

	// Nothing left to build from.
	if code, _, stderr := runMmlab(t, "report", "--skip-bad", bad, "-o", t.TempDir()); code != 1 || !strings.Contains(stderr, "every document was refused") {
		t.Errorf("--skip-bad of one bad document: exit %d, stderr %q", code, stderr)
	}
}
