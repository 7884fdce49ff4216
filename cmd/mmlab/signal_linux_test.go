package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
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

// startKeeper starts path (mmlab, or a copy of it) as a process that maps
// its text and sleeps until the test ends, as a process that a run's
// probes reach and that outlives the run: the forkstall holder role with
// no children. It returns the pid; ETXTBSY while path is being written.
func startKeeper(t *testing.T, path string) (int, error) {
	cmd := exec.Command(path)
	cmd.Env = append(os.Environ(), "MMLAB_ROLE=forkstall-holder", "MMLAB_FORKSTALL_ARG=0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		return 0, fmt.Errorf("keeper %s: %q, %v", path, line, err)
	}
	return cmd.Process.Pid, nil
}

// textChanged returns the file offsets where the executable mappings of
// process pid's own executable (read through /proc/PID/mem, as a debugger
// does) differ from the file (read through /proc/PID/exe, which a removed
// file keeps): the breakpoints a uprobe wrote into its private copy.
func textChanged(t *testing.T, pid int) []int64 {
	proc := "/proc/" + strconv.Itoa(pid)
	exe, err := os.Readlink(proc + "/exe")
	if err != nil {
		t.Fatal(err)
	}
	maps, err := os.ReadFile(proc + "/maps")
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.Open(proc + "/exe")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	mem, err := os.Open(proc + "/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	var diff []int64
	for line := range strings.Lines(string(maps)) {
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "r-xp" || strings.Join(f[5:], " ") != exe {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, _ := strconv.ParseUint(lo, 16, 64)
		end, _ := strconv.ParseUint(hi, 16, 64)
		off, _ := strconv.ParseInt(f[2], 16, 64)
		got, want := make([]byte, end-start), make([]byte, end-start)
		if _, err := mem.ReadAt(got, int64(start)); err != nil {
			t.Fatalf("%s/mem at %#x: %v", proc, start, err)
		}
		n, _ := file.ReadAt(want, off) // the mapping may run past the file's end
		for i := range got[:n] {
			if got[i] != want[i] {
				diff = append(diff, off+int64(i))
			}
		}
	}
	return diff
}

// TestSignals interrupts every live experiment and the main job with
// SIGINT and SIGTERM, after their first and their third line of progress,
// and checks what a user would: the exit status (130, 143), that mmlab and
// every process it started are gone, no BPF link made during the runs
// outlives its files, no temporary directory is left, and processes that
// map the probed files and outlive the run (the test keeps them) have
// their original text. The time from the signal to the exit is logged
// (the interrupt reaches a kernel operation only when it ends: see
// --help).
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
		args := append([]string{"run", e.Name(), "--target", target}, e.Settings().Quick...)
		runs = append(runs, args)
	}
	linksBefore := bpfLinkIDs(t)
	var times []string // each run's time from the signal to its exit
	defer func() { t.Logf("from the signal to the exit:\n%s", strings.Join(times, "\n")) }()
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
					// A pipe of the test's own rather than StderrPipe,
					// which Wait closes: what mmlab wrote last is read
					// after it has exited.
					stderr, stderrW, err := os.Pipe()
					if err != nil {
						t.Fatal(err)
					}
					defer stderr.Close()
					cmd.Stderr = stderrW
					var out bytes.Buffer
					cmd.Stdout = &out
					err = cmd.Start()
					stderrW.Close()
					if err != nil {
						t.Fatal(err)
					}
					pgid := cmd.Process.Pid
					k, err := startKeeper(t, bin)
					if err != nil {
						t.Fatal(err)
					}
					keepers := []int{k}
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
					// The rest of stderr, to tell a live part this host
					// cannot run (machine.ErrNotSupported: the run ends at
					// once, whatever the signal) from a signal mishandled.
					rest := make(chan string, 1)
					go func() {
						var b strings.Builder
						for lines.Scan() {
							b.WriteString(lines.Text() + "\n")
						}
						rest <- b.String()
					}()
					// The probed copy of a forkstall run, kept alive too.
					if m, _ := filepath.Glob(filepath.Join(tmp, "mmlab-forkstall-*", "mmlab-probed")); len(m) > 0 {
						switch k, err := startKeeper(t, m[0]); {
						case errors.Is(err, syscall.ETXTBSY):
							t.Logf("the probed copy is still being written: no process of it kept")
						case err != nil:
							t.Fatal(err)
						default:
							keepers = append(keepers, k)
						}
					}
					for _, k := range keepers {
						if d := textChanged(t, k); len(d) > 0 {
							t.Logf("kept-alive process %d is probed: %d bytes of its text differ from its file", k, len(d))
						}
					}
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
					exited := time.Since(t0).Round(time.Millisecond)
					t.Logf("exited %v after %v", exited, sig)
					times = append(times, fmt.Sprintf("%-48s %v", name, exited))
					want := 130
					if sig == syscall.SIGTERM {
						want = 143
					}
					code := cmd.ProcessState.ExitCode()
					tail := <-rest
					unsupported := code == 1 && strings.Contains(tail, "not supported here")
					if unsupported {
						defer t.Skipf("the live part cannot run on this host: %s", strings.TrimSpace(tail))
					} else if code != want {
						t.Errorf("exit %d after %v, want %d; stderr began %q", code, sig, want, log)
					}
					for _, k := range keepers {
						if d := textChanged(t, k); len(d) > 0 {
							t.Errorf("kept-alive process %d: %d bytes of its text differ from its file after the run (first at %#x)", k, len(d), d[0])
						}
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

// TestInterruptedCountsEveryDeliveredSignal sends mmlab's own process a
// signal and asks at once which signal interrupted it, as main asks when a
// command returns: the answer names the signal, although the goroutine that
// cancels may not have run by then, and it has cancelled the context. With
// no signal sent the answer is nil.
func TestInterruptedCountsEveryDeliveredSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		for range 100 {
			ctx, interrupted := interruptible()
			if err := syscall.Kill(os.Getpid(), sig); err != nil {
				t.Fatal(err)
			}
			if got := interrupted(); got != sig || ctx.Err() == nil {
				t.Fatalf("after kill(%v): interrupted() = %v, context error %v", sig, got, ctx.Err())
			}
		}
	}
	ctx, interrupted := interruptible()
	if got := interrupted(); got != nil || ctx.Err() != nil {
		t.Errorf("with no signal: interrupted() = %v, context error %v", got, ctx.Err())
	}
}
