package forkstall

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
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
// nothing: forks are timed, windows filled, and nothing is left behind.
func TestHarnessNoProbes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	for _, c := range []string{CaseBusyMaps, CaseBusyForks, CaseIdle1000} {
		t.Run(c, func(t *testing.T) {
			o := Options{Case: c, Mode: ModeMulti4, Runs: 2, Size: 64 << 20,
				Hold: 20 * time.Millisecond, Gap: 20 * time.Millisecond,
				Attach: func(ctx context.Context, path string, offsets []uint64, mode string) (func() error, error) {
					if len(offsets) != 4 || !strings.HasSuffix(path, "mmlab-probed") {
						t.Errorf("attach(%s, %v)", path, offsets)
					}
					time.Sleep(30 * time.Millisecond) // a window long enough to hold forks
					return func() error { time.Sleep(30 * time.Millisecond); return nil }, nil
				}}
			res, err := RunLive(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Runs) != 2 {
				t.Fatalf("runs = %d", len(res.Runs))
			}
			for _, r := range res.Runs {
				if r.Forks == 0 || r.ForkMaxMs <= 0 || r.BaselineMs <= 0 {
					t.Errorf("run %+v: no forks seen in the windows", r)
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
	ctx, cancel := context.WithCancel(context.Background())
	o := Options{Case: CaseIdle1000, Mode: ModeMulti1, Runs: 100, Hold: time.Second,
		Attach: func(context.Context, string, []uint64, string) (func() error, error) {
			cancel()
			return func() error { return nil }, nil
		}}
	if _, err := RunLive(ctx, o); err == nil {
		t.Fatal("cancelled run returned no error")
	}
	if k := children(t); len(k) != 0 {
		t.Errorf("left behind: %v", k)
	}
	// The holder's 1000 children die with it (PR_SET_PDEATHSIG).
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if countProbed() == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("%d processes still run the probed copy", countProbed())
}

func countProbed() int {
	n := 0
	ents, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, e := range ents {
		if l, err := os.Readlink(e); err == nil && strings.Contains(l, "mmlab-forkstall-") {
			n++
		}
	}
	return n
}
