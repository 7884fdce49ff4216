package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"mmlab/report/reporttest"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// mmlabBinary builds this command once for the tests that run it as a user
// would, in its own process.
func mmlabBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mmlab-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "mmlab")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = err
			t.Logf("%s", out)
		}
	})
	if buildErr != nil {
		t.Fatalf("go build: %v", buildErr)
	}
	return binPath
}

// TestAllEndToEnd runs the main job in its smallest setting, as a user
// would, and reads what it printed and saved: three seed sections each
// with a verdict, a document per experiment, and a report that headless
// Chromium renders with every chart drawn (a screenshot is kept).
func TestAllEndToEnd(t *testing.T) {
	bin := mmlabBinary(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "all", "--smoke", "--quiet", "--out", dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("mmlab all --smoke: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, id := range []string{"000", "003", "004"} {
		if !strings.Contains(out, "\n== seed "+id+": ") {
			t.Errorf("no section of seed %s in the output", id)
		}
		if !strings.Contains(out, "\nseed "+id+": ") {
			t.Errorf("no verdict line of seed %s", id)
		}
	}
	if i, j := strings.Index(out, "== seed 000"), strings.Index(out, "== seed 004"); i < 0 || j < i {
		t.Error("seed sections out of order")
	}
	for _, name := range boundExperiments {
		if name.Seed() == "" {
			continue // of no seed: not a step of mmlab all
		}
		if _, err := os.Stat(filepath.Join(dir, name.Name()+".json")); err != nil {
			t.Errorf("no saved document of %s: %v", name.Name(), err)
		}
	}
	// mmlab report reads every document mmlab all wrote.
	rebuilt := t.TempDir()
	report := exec.Command(bin, "report", dir, "-o", rebuilt)
	if out, err := report.CombinedOutput(); err != nil {
		t.Errorf("mmlab report of mmlab all's results: %v\n%s", err, out)
	}
	index := filepath.Join(dir, "index.html")
	b, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	// The page as written, then as Chromium builds it.
	root, err := reporttest.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	sum := reporttest.Check(t, root)
	if len(sum.Seeds) != 3 {
		t.Errorf("%d seed sections on the page, want 3", len(sum.Seeds))
	}
	bin2 := reporttest.Chromium()
	if bin2 == "" {
		t.Log(reporttest.SkipMessage)
		return
	}
	dom := reporttest.DOM(t, bin2, "file://"+index)
	if got := reporttest.Check(t, dom); got.Charts != sum.Charts || got.Tables != sum.Tables {
		t.Errorf("Chromium shows %d charts and %d tables, the page has %d and %d", got.Charts, got.Tables, sum.Charts, sum.Tables)
	}
	shot := filepath.Join(reporttest.Artifacts(t), "all-smoke.png")
	reporttest.Screenshot(t, bin2, "file://"+index, shot, 1200)
	t.Logf("screenshot: %s", shot)
}

// TestAllInterrupted sends SIGINT to the main job once its first document
// is saved: it exits 130, keeps what finished and marks the report.
func TestAllInterrupted(t *testing.T) {
	bin := mmlabBinary(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "all", "--smoke", "--quiet", "--out", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Wait for the first saved document (polling the directory: the
	// event, not a time, decides when the signal goes).
	for {
		m, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		if len(m) > 0 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("mmlab all ended before saving anything: %v\n%s", err, stderr.String())
		default:
		}
		time.Sleep(time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := <-done
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit %d (%v), want 130\n%s", code, err, stderr.String())
	}
	docs, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(docs) == 0 {
		t.Error("the finished results are gone")
	}
	b, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(bytes.ToLower(b), []byte("interrupted")) {
		t.Error("the report does not say the run was interrupted")
	}
}
