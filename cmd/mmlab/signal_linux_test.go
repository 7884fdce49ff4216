package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// bpf runs the bpf(2) command cmd on attr.
func bpf(cmd uintptr, attr unsafe.Pointer, size uintptr) (uintptr, syscall.Errno) {
	r, _, e := syscall.Syscall(321 /* SYS_BPF on amd64 */, cmd, uintptr(attr), size)
	return r, e
}

// bpfLinkIDs lists the BPF link IDs of the system (BPF_LINK_GET_NEXT_ID).
func bpfLinkIDs(t *testing.T) []uint32 {
	const bpfLinkGetNextID = 31
	var ids []uint32
	attr := struct{ start, next, flags uint32 }{}
	for {
		_, e := bpf(bpfLinkGetNextID, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
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

// heldLinkIDs lists the BPF link IDs some process holds a file for: the
// "link_id:" lines of every /proc/PID/fdinfo/FD (bpf_link_show_fdinfo).
func heldLinkIDs() map[uint32]bool {
	held := map[uint32]bool{}
	infos, _ := filepath.Glob("/proc/[0-9]*/fdinfo/*")
	for _, f := range infos {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the file or the process is gone
		}
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "link_id:"); ok {
				if id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32); err == nil {
					held[uint32(id)] = true
				}
			}
		}
	}
	return held
}

// linkAlive reports whether link id still exists: BPF_LINK_GET_FD_BY_ID
// takes a reference only on a link whose count is not zero
// (bpf_link_inc_not_zero), so a link being released is not alive.
func linkAlive(id uint32) bool {
	const bpfLinkGetFDByID = 30
	attr := struct{ id, next, flags uint32 }{id: id}
	fd, e := bpf(bpfLinkGetFDByID, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	if e != 0 {
		return false
	}
	syscall.Close(int(fd))
	return true
}

// leakedLinks returns the links made since before that outlive every file
// for them: mmlab's links are all tied to its files, so once its process
// group is gone, such a link is one it pinned or leaked. Links other test
// packages hold while they run in parallel have a holder and are not
// counted; one released between the two looks is not alive.
func leakedLinks(t *testing.T, before []uint32) []uint32 {
	var fresh []uint32
	for _, id := range bpfLinkIDs(t) {
		if !slices.Contains(before, id) {
			fresh = append(fresh, id)
		}
	}
	held := heldLinkIDs()
	var leaked []uint32
	for _, id := range fresh {
		if !held[id] && linkAlive(id) {
			leaked = append(leaked, id)
		}
	}
	return leaked
}

// TestSignals interrupts every live experiment and the main job with
// SIGINT and SIGTERM, after their first and their third line of progress,
// and checks what a user would: the exit status (130, 143), that mmlab and
// every process it started are gone, no BPF link made during the runs
// outlives its files, no temporary
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
	linksBefore := bpfLinkIDs(t)
	for _, args := range runs {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
			for _, after := range []int{1, 3} {
				name := strings.Join(args[:2], " ") + " " + sig.String() + " after line " + string(rune('0'+after))
				t.Run(name, func(t *testing.T) {
					if args[0] == "all" {
						args = append(args, "--out", t.TempDir())
					}
					cmd := exec.Command(bin, args...)
					tmp := t.TempDir() // mmlab's temporary directories go here, and only mmlab's
					cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
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
					if left, _ := os.ReadDir(tmp); len(left) > 0 {
						t.Errorf("left behind in TMPDIR: %s", left[0].Name())
					}
				})
			}
		}
	}
	if leaked := leakedLinks(t, linksBefore); len(leaked) > 0 {
		t.Errorf("BPF links left with no file open for them: IDs %v", leaked)
	}
}
