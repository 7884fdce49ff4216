package live

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"mmlab/errno"
)

// The fork helper runs as a process of its own (no root needed): it
// touches its pages, forks and reaps each child, and writes a record per
// fork, exiting 0 after the last.
func TestForkHelperRuns(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the fork helper is x86-64 code")
	}
	for _, pages := range []uint32{0, 16} {
		path := filepath.Join(t.TempDir(), "forkhelper")
		if err := os.WriteFile(path, ForkHelperELF(ForkHelper{Pages: pages, Forks: 3, CPU: -1}), 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(path).Output()
		recs := ParseForkRecords(out)
		if err != nil || len(out) != 48 || len(recs) != 3 {
			t.Fatalf("%d pages: %v, output %x", pages, err, out)
		}
		for i, r := range recs {
			if r.Dur <= 0 || i > 0 && r.Start <= recs[i-1].Start+recs[i-1].Dur {
				t.Errorf("%d pages: records %v", pages, recs)
			}
		}
	}
}

// A helper whose call fails exits with the errno, which ForkHelperExit
// names: a file that does not exist is ENOENT.
func TestForkHelperExitNamesErrno(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the fork helper is x86-64 code")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "forkhelper")
	if err := os.WriteFile(path, ForkHelperELF(ForkHelper{Forks: 1, CPU: -1, File: filepath.Join(dir, "absent"), FileLen: 4096}), 0o755); err != nil {
		t.Fatal(err)
	}
	err := ForkHelperExit(exec.Command(path).Run())
	if !errors.Is(err, errno.ENOENT) || !strings.Contains(err.Error(), "exit status 2") {
		t.Errorf("ForkHelperExit = %v, want exit status 2 and ENOENT", err)
	}
	if err := ForkHelperExit(nil); err != nil {
		t.Errorf("ForkHelperExit(nil) = %v", err)
	}
}

// A helper given a CPU and a file runs pinned to the CPU with the file
// mapped read-execute, and with no fork count forks until killed.
func TestForkHelperPinsAndMaps(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the fork helper is x86-64 code")
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	cpu := -1
	for c := 0; c < 64; c++ {
		if set.IsSet(c) {
			cpu = c
		}
	}
	if cpu < 0 {
		t.Skip("no CPU under 64 in this process's affinity")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "mapped")
	if err := os.WriteFile(file, make([]byte, 3*4096+5), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "forkhelper")
	if err := os.WriteFile(path, ForkHelperELF(ForkHelper{CPU: cpu, File: file, FileLen: 3*4096 + 5}), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot run the helper here (%v)", err) // a noexec TMPDIR
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	var rec [32]byte
	if _, err := io.ReadFull(out, rec[:]); err != nil {
		t.Fatalf("no two records: %v", err)
	}
	maps, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/maps")
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(maps), "\n") {
		if strings.HasSuffix(l, " "+file) {
			line = l
		}
	}
	if f := strings.Fields(line); len(f) < 2 || f[1] != "r-xp" {
		t.Errorf("the file's mapping: %q in\n%s", line, maps)
	}
	var got unix.CPUSet
	if err := unix.SchedGetaffinity(cmd.Process.Pid, &got); err != nil {
		t.Fatal(err)
	}
	if got.Count() != 1 || !got.IsSet(cpu) {
		t.Errorf("the helper's affinity: %d CPUs, CPU %d set: %v", got.Count(), cpu, got.IsSet(cpu))
	}
}
