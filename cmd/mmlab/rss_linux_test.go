package main

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// TestAllPeakRSS prints the peak resident set of `mmlab all`, measured
// from the child (wait4's ru_maxrss: the largest of mmlab and every helper
// it reaped), without asserting it: it depends on the host. The smoke
// setting runs always; MMLAB_RSS=quick adds the quick setting's model and
// live parts, each alone (a few minutes).
func TestAllPeakRSS(t *testing.T) {
	bin := mmlabBinary(t)
	runs := [][]string{{"--smoke"}}
	if os.Getenv("MMLAB_RSS") == "quick" {
		runs = append(runs, []string{"--quick", "--target", "model"}, []string{"--quick", "--target", "live"})
	}
	for _, args := range runs {
		cmd := exec.Command(bin, append([]string{"all", "--quiet", "--out", t.TempDir()}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("mmlab all %v: %v\n%s", args, err, out)
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		t.Logf("mmlab all %v: peak RSS %d MiB (wait4 ru_maxrss)", args, ru.Maxrss>>10)
	}
}
