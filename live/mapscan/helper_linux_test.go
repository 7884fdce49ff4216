package mapscan

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// threadPolicy is /proc/PID/task/TID/stat's policy (field 41).
func threadPolicy(pid, tid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // from field 3, the state
	if len(fields) < 39 {
		return 0, fmt.Errorf("stat of %d/%d: %d fields", pid, tid, len(fields))
	}
	return strconv.Atoi(fields[41-3])
}

// A helper's working thread keeps its policy (SCHED_NORMAL), and every
// other thread of it, the Go runtime's, is SCHED_IDLE, so that none of
// them preempts the seed's tasks on the helpers' CPUs.
func TestHelperRuntimeThreadsIdle(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("the helpers use CPUs 0 and 1: this machine has one")
	}
	h, err := startHelper(context.Background(), roleBusy, busyEnv+"=1000000", cpuEnv+"=1")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Kill()
	pid := h.Cmd.Process.Pid
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	const normal, idle = 0, 5 // SCHED_NORMAL, SCHED_IDLE
	others := 0
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		p, err := threadPolicy(pid, tid)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case tid == h.tid:
			if p != normal {
				t.Errorf("the working thread %d has policy %d, want SCHED_NORMAL", tid, p)
			}
		case p != idle:
			t.Errorf("thread %d has policy %d, want SCHED_IDLE", tid, p)
		default:
			others++
		}
	}
	if others == 0 {
		t.Errorf("no thread besides the working one among %d", len(ents))
	}
}
