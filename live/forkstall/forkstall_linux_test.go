package forkstall

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"mmlab/experiment/forkstall"
)

func TestProbeOffsetsPointAtSites(t *testing.T) {
	offs, err := probeOffsets(4)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for _, o := range offs {
		if o == 0 || seen[o] {
			t.Errorf("offsets %v: zero or repeated", offs)
		}
		seen[o] = true
	}
}

// children lists the live processes whose parent is this one.
func children(t *testing.T) []string {
	t.Helper()
	var kids []string
	ents, _ := filepath.Glob("/proc/[0-9]*/stat")
	me := strconv.Itoa(os.Getpid())
	for _, e := range ents {
		b, err := os.ReadFile(e)
		if err != nil {
			continue
		}
		s := string(b)
		rest := s[strings.LastIndexByte(s, ')')+1:] // " S PPID ..."
		f := strings.Fields(rest)
		if len(f) > 1 && f[1] == me && f[0] != "Z" {
			kids = append(kids, e)
		}
	}
	return kids
}

// TestHarnessNoProbes runs the whole harness with an attacher that attaches
// nothing, each window held open until a fork started inside it has been
// recorded: every window's forks are counted and timed, and nothing is left
// behind.
func TestHarnessNoProbes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	forkInEveryWindow(t)
	for _, c := range []string{forkstall.CaseBusyMaps, forkstall.CaseBusyForks, forkstall.CaseIdle1000} {
		t.Run(c, func(t *testing.T) {
			attached, detached := 0, 0
			o := caseRun{Case: c, Mode: forkstall.ModeMulti4, Runs: 2, Size: 64 << 20,
				Hold: 20 * time.Millisecond, Gap: 20 * time.Millisecond,
				Attach: func(ctx context.Context, path string, offsets []uint64, mode string) (func() error, error) {
					if len(offsets) != 4 || !strings.HasSuffix(path, "mmlab-probed") || mode != forkstall.ModeMulti4 {
						t.Errorf("attach(%s, %v, %s)", path, offsets, mode)
					}
					attached++
					return func() error { detached++; return nil }, nil
				}}
			runs, err := runCase(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != 2 || attached != 2 || detached != 2 {
				t.Fatalf("%d runs, %d attaches, %d detaches; want 2 each", len(runs), attached, detached)
			}
			for _, r := range runs {
				if r.Forks < 2 || r.ForkMaxMs <= 0 || r.BaselineMs <= 0 || r.AttachMs <= 0 || r.DetachMs <= 0 {
					t.Errorf("run %+v: a window without its fork", r)
				}
			}
			if k := children(t); len(k) != 0 {
				t.Errorf("left behind: %v", k)
			}
		})
	}
}

// TestHarnessCancel cancels mid-run: everything started is gone.
func TestHarnessCancel(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	dirs := watchProbedDirs(t)
	ctx, cancel := context.WithCancel(context.Background())
	o := caseRun{Case: forkstall.CaseIdle1000, Mode: forkstall.ModeMulti1, Runs: 100, Hold: time.Second, Gap: time.Second,
		Attach: func(context.Context, string, []uint64, string) (func() error, error) {
			cancel()
			return func() error { return nil }, nil
		}}
	if _, err := runCase(ctx, o); err == nil {
		t.Fatal("cancelled run returned no error")
	}
	if k := children(t); len(k) != 0 {
		t.Errorf("left behind: %v", k)
	}
	// The holder's 1000 children die with it (PR_SET_PDEATHSIG), which the
	// kernel does after the holder is gone: wait for them (the bound is
	// for a hang, not a measure). Only this run's copy counts: other
	// tests may run forkstall at the same time.
	if len(*dirs) != 1 {
		t.Fatalf("%d probed copies, want 1", len(*dirs))
	}
	deadline := time.Now().Add(time.Minute)
	for countProbed((*dirs)[0]) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := countProbed((*dirs)[0]); n > 0 {
		t.Errorf("%d processes still run the probed copy a minute later", n)
	}
}

func TestLongestIn(t *testing.T) {
	forks := []forkRecord{{Start: 10, Dur: 5}, {Start: 20, Dur: 50}, {Start: 30, Dur: 7}, {Start: 45, Dur: 100}, {Start: 60, Dur: 1}}
	maxNs, n := longestIn(forks, [2]int64{0, 25}, [2]int64{40, 50})
	if maxNs != 100 || n != 3 {
		t.Errorf("longestIn = %d, %d; want 100, 3", maxNs, n)
	}
	if maxNs, n := longestIn(forks, [2]int64{100, 200}); maxNs != 0 || n != 0 {
		t.Errorf("empty window = %d, %d", maxNs, n)
	}
	// A window is half-open: a fork starting at its end is outside.
	if _, n := longestIn(forks, [2]int64{0, 10}); n != 0 {
		t.Errorf("fork at window end counted")
	}
}

// countProbed counts the processes that run a probed copy in dir.
func countProbed(dir string) int {
	n := 0
	ents, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, e := range ents {
		if l, err := os.Readlink(e); err == nil && strings.HasPrefix(l, dir+"/") {
			n++
		}
	}
	return n
}
