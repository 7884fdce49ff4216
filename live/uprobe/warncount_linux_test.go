package uprobe

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"mmlab/live"
	"mmlab/uapi"
)

// The kernel's warning counter when an unregistering task is killed during
// the removal of an optimized probe. Opt-in only (MMLAB_WARN_COUNT=1): a
// WARN taints the kernel.

// readWarnCount returns /sys/kernel/warn_count and /proc/sys/kernel/tainted.
func readWarnCount(t *testing.T) (warns, tainted uint64) {
	t.Helper()
	for _, f := range []struct {
		path string
		v    *uint64
	}{{"/sys/kernel/warn_count", &warns}, {"/proc/sys/kernel/tainted", &tainted}} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			t.Skip(err)
		}
		if *f.v, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err != nil {
			t.Fatalf("%s: %v", f.path, err)
		}
	}
	return warns, tainted
}

// The helper process of TestLiveWarnCountKilledRemoval: it attaches a
// uprobe_multi link on MMLAB_UPROBE_UNREGISTER's file for process
// MMLAB_UPROBE_PID, says "attached", and detaches it when a line arrives on
// its stdin (the removal runs in its close, where it is killed).
func TestLiveHelperUnregister(t *testing.T) {
	path := os.Getenv("MMLAB_UPROBE_UNREGISTER")
	if path == "" {
		t.Skip("helper process only")
	}
	pid, err := strconv.Atoi(os.Getenv("MMLAB_UPROBE_PID"))
	if err != nil {
		t.Fatal(err)
	}
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0)
	p, err := Attach(context.Background(), Spec{Path: path, Offsets: []uint64{codeSite}, Mode: uapi.AttachMulti, Pid: pid})
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("attached\n")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	t.Log(p.Close())
}

// A task killed while it unregisters an optimized probe: the helper's
// removal waits for this process's mmap_lock, which a loop of
// mmap(MAP_POPULATE)s keeps busy; it is SIGKILLed while it waits, so
// every GUP after it gets the lock fails with EINTR. v6.19's
// set_orig_insn() warns (WARN_ON_ONCE, which seed 000's patch 4 removes) if
// swbp_unoptimize() fails, but here is_optimized()'s read fails first and
// returns before it. The test checks the site's bytes and
// /sys/kernel/warn_count against the model's prediction for that kill
// (uprobes.TestKilledBeforeUnoptimize: the call stays, nothing warns) and
// names the states of the model's later kill points if the kill landed
// later. The uprobe leaks ("failed to unregister, leaking uprobe" in the
// kernel log) until reboot.
func TestLiveWarnCountKilledRemoval(t *testing.T) {
	if os.Getenv("MMLAB_WARN_COUNT") != "1" {
		t.Skip("opt-in: MMLAB_WARN_COUNT=1 (a kernel warning taints the kernel)")
	}
	needOptimized(t)
	warns0, taint0 := readWarnCount(t)
	codePath := writeCodeFile(t)
	f, err := os.Open(codePath)
	if err != nil {
		t.Fatal(err)
	}
	code, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Munmap(code) }()
	pc := uintptr(unsafe.Pointer(&code[0])) + codeSite
	site := func() []byte {
		b := make([]byte, 5)
		if err := readAt("/proc/self/mem", b, int64(pc)); err != nil {
			t.Fatal(err)
		}
		return b
	}

	cmd, stdin := startHelper(t, "TestLiveHelperUnregister", "attached",
		"MMLAB_UPROBE_UNREGISTER="+codePath, "MMLAB_UPROBE_PID="+strconv.Itoa(os.Getpid()))
	callLoop(pc, 10)
	if got := site(); got[0] != 0xe8 {
		t.Fatalf("site % x after 10 hits, want it optimized into a call", got)
	}

	// Keep this mm's mmap_lock busy, as seed 000's busy process does: an
	// mmap(MAP_POPULATE) holds it for read while it faults the region in,
	// and a writer waiting for readers sleeps.
	const busy = 1 << 30
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	looped := make(chan error, 1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			b, err := unix.Mmap(-1, 0, busy, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
			if err == nil {
				err = unix.Munmap(b)
			}
			if i == 0 || err != nil {
				select {
				case looped <- err:
				default:
				}
			}
		}
	}()
	defer func() { stop.Store(true); wg.Wait() }()
	if err := <-looped; err != nil {
		t.Fatal(err)
	}

	if _, err := stdin.Write([]byte("detach\n")); err != nil {
		t.Fatal(err)
	}
	// Wait until a thread of the helper waits for this mm's mmap_lock
	// inside the removal (waiting for another process, not forcing an
	// interleaving).
	stack := waitInRemoval(t, cmd.Process.Pid)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	stop.Store(true)
	wg.Wait()
	got := site()
	warns1, taint1 := readWarnCount(t)
	t.Logf("helper killed while waiting in:\n%s", stack)
	t.Logf("helper: %v; site % x; warn_count %d -> %d; tainted %#x -> %#x", err, got, warns0, warns1, taint0, taint1)

	// The model's prediction (uprobes.TestKilledBeforeUnoptimize): the
	// call stays and nothing warns.
	orig := []byte{0x0f, 0x1f, 0x44, 0x00, 0x00}
	switch {
	case got[0] == 0xe8:
		t.Log("the removal stopped before its first write: the call stays, as in the model")
	case bytes.Equal(got, orig):
		t.Error("the removal finished: the kill did not stop it (seed 000's patch 8, or the helper got the lock before the kill)")
	case got[0] == 0xcc && bytes.Equal(got[1:], orig[1:]):
		t.Error("the removal stopped after write 2 (int3 and the original tail): the kill landed later than the wait")
	case got[0] == 0xcc:
		t.Error("the removal stopped after write 1 (int3 and the call's rel32): the kill landed later than the wait")
	default:
		t.Errorf("site % x is none of the states a removal stopped half-way leaves", got)
	}
	if warns1 != warns0 {
		t.Errorf("the kernel warned (%d new warnings, tainted %#x): the model predicts none for a kill during the wait; a WARN_ON_ONCE of a failed unoptimization (seed 000 patch 4 drops it) means the kill landed after is_optimized(), or another warning came meanwhile (dmesg)", warns1-warns0, taint1)
	} else {
		t.Log("warn_count unchanged, as in the model")
	}
}

// waitInRemoval waits until a thread of process pid sleeps in
// register_for_each_vma itself and returns its kernel stack: the
// scheduler's frames (rwsem_down_write_slowpath is __sched) are not shown,
// so the top frame is the function that took the lock, and once
// dup_mmap_sem is taken (rcu_sync_enter and percpu_down_write show as
// frames of their own) the one lock it sleeps on is an mm's mmap_lock.
func waitInRemoval(t *testing.T, pid int) []byte {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/task", pid)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
		tids, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, tid := range tids {
			stack, _ := os.ReadFile(dir + "/" + tid.Name() + "/stack")
			if top, _, _ := bytes.Cut(stack, []byte("\n")); bytes.Contains(top, []byte("register_for_each_vma+")) {
				return stack
			}
		}
	}
	t.Fatal("the helper never waited for this mm's mmap_lock in register_for_each_vma")
	return nil
}

// startHelper runs test of this test binary as a helper process with env
// added, waits for its first line, want, and returns it and a pipe to its
// stdin. The helper is killed when the test ends.
func startHelper(t *testing.T, test, want string, env ...string) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	stdin, out, err := live.StartPiped(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := out.ReadString('\n'); err != nil || line != want+"\n" {
		t.Fatalf("helper %s: %q, %v", test, line, err)
	}
	return cmd, stdin
}
