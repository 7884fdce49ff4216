package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAllPeakRSS prints the peak resident set of `mmlab all`, measured
// from the child, without asserting it: it depends on the host. It prints
// two figures: wait4's ru_maxrss, the largest of mmlab and every helper it
// reaped (a live run's busy helper populates the setting's whole busy
// region, 512 MiB in the quick setting, so this is at least that much), and
// mmlab's own VmHWM (/proc/PID/status, the high-water mark of its own
// resident set), read every 20 ms while it runs, so that growth in its last
// 20 ms is missed. The smoke setting runs always; MMLAB_RSS=quick adds the
// quick setting with both targets and with the model alone (a few
// minutes).
func TestAllPeakRSS(t *testing.T) {
	bin := mmlabBinary(t)
	runs := [][]string{{"--smoke"}}
	if os.Getenv("MMLAB_RSS") == "quick" {
		runs = append(runs, []string{"--quick"}, []string{"--quick", "--target", "model"})
	}
	for _, args := range runs {
		cmd := exec.Command(bin, append([]string{"all", "--quiet", "--out", t.TempDir()}, args...)...)
		out, err := os.CreateTemp(t.TempDir(), "out")
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var own int64
		tick := time.NewTicker(20 * time.Millisecond)
	wait:
		for {
			select {
			case err = <-done:
				break wait
			case <-tick.C:
				own = max(own, vmHWM(cmd.Process.Pid))
			}
		}
		tick.Stop()
		if err != nil {
			b, _ := os.ReadFile(out.Name())
			t.Fatalf("mmlab all %v: %v\n%s", args, err, b)
		}
		out.Close()
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		t.Logf("mmlab all %v: peak RSS %d MiB (wait4 ru_maxrss: mmlab or a helper), mmlab's own %d MiB (VmHWM)", args, ru.Maxrss>>10, own>>10)
	}
}

// vmHWM returns the VmHWM of process pid in KiB, 0 if it cannot be read
// (the process has exited).
func vmHWM(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}
