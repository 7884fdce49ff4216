package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// bpfLinkIDs lists the BPF link IDs of the system (BPF_LINK_GET_NEXT_ID).
func bpfLinkIDs(t *testing.T) []uint32 {
	const bpfLinkGetNextID = 31
	var ids []uint32
	attr := struct{ start, next, flags uint32 }{}
	for {
		_, _, e := syscall.Syscall(321 /* SYS_BPF on amd64 */, bpfLinkGetNextID, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
		if e == syscall.ENOENT {
			return ids
		}
		if e != 0 {
			t.Skipf("BPF_LINK_GET_NEXT_ID: %v", e)
		}
		ids = append(ids, attr.next)
		attr.start = attr.next
	}
}

// tempDirs lists the temporary directories mmlab's live parts make.
func tempDirs() []string {
	var all []string
	for _, pat := range []string{"mmlab-forkstall-*", "mmlab-replay-*"} {
		for _, base := range []string{os.TempDir(), "/dev/shm"} {
			m, _ := filepath.Glob(filepath.Join(base, pat))
			all = append(all, m...)
		}
	}
	return all
}

// TestSignals interrupts every live experiment and the main job with
// SIGINT and SIGTERM, after their first and their third line of progress,
// and checks what a user would: the exit status (130, 143), that mmlab and
// every process it started are gone, no BPF link is left, no temporary
// directory is left. The time to exit is logged (the interrupt reaches a
// kernel operation only when it ends: see --help).
func TestSignals(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the live experiments need root")
	}
	bin := mmlabBinary(t)
	runs := [][]string{{"all", "--quick", "--target", "live"}}
	for _, e := range boundExperiments {
		target := "live"
		if e.Check([]string{"--target", "live"}) != nil {
			target = "model" // it has no live side
		}
		args := append([]string{"run", e.Name(), "--target", target}, e.QuickArgs()...)
		runs = append(runs, args)
	}
	linksBefore := len(bpfLinkIDs(t))
	dirsBefore := tempDirs()
	for _, args := range runs {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
			for _, after := range []int{1, 3} {
				name := strings.Join(args[:2], " ") + " " + sig.String() + " after line " + string(rune('0'+after))
				t.Run(name, func(t *testing.T) {
					if args[0] == "all" {
						args = append(args, "--out", t.TempDir())
					}
					cmd := exec.Command(bin, args...)
					cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
					stderr, err := cmd.StderrPipe()
					if err != nil {
						t.Fatal(err)
					}
					var out bytes.Buffer
					cmd.Stdout = &out
					if err := cmd.Start(); err != nil {
						t.Fatal(err)
					}
					pgid := cmd.Process.Pid
					lines := bufio.NewScanner(stderr)
					seen := 0
					var log []string
					for seen < after && lines.Scan() {
						seen++
						log = append(log, lines.Text())
					}
					if seen < after {
						cmd.Wait()
						t.Skipf("ended after %d lines, before the signal: %q", seen, log)
					}
					go func() {
						for lines.Scan() {
						}
					}()
					t0 := time.Now()
					cmd.Process.Signal(sig)
					done := make(chan struct{})
					go func() { cmd.Wait(); close(done) }()
					select {
					case <-done:
					case <-time.After(60 * time.Second): // a hang, not a measure
						syscall.Kill(-pgid, syscall.SIGKILL)
						<-done
						t.Fatalf("still running a minute after %v", sig)
					}
					t.Logf("exited %v after %v", time.Since(t0).Round(time.Millisecond), sig)
					want := 130
					if sig == syscall.SIGTERM {
						want = 143
					}
					if code := cmd.ProcessState.ExitCode(); code != want {
						t.Errorf("exit %d after %v, want %d; stderr began %q", code, sig, want, log)
					}
					if err := syscall.Kill(-pgid, 0); err != syscall.ESRCH {
						t.Errorf("process group %d still has members after exit (%v)", pgid, err)
						syscall.Kill(-pgid, syscall.SIGKILL)
					}
				})
			}
		}
	}
	if n := len(bpfLinkIDs(t)); n != linksBefore {
		t.Errorf("%d BPF links before, %d after", linksBefore, n)
	}
	for _, d := range tempDirs() {
		if !slices.Contains(dirsBefore, d) {
			t.Errorf("left behind: %s", d)
		}
	}
}
