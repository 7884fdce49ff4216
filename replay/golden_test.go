package replay

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mmlab/machine"
	"mmlab/trace"
)

// TestGoldens replays every trace of testdata/traces on the model and
// compares with its golden output, recorded from the live kernel. A trace
// whose "# requires:" lines name features this host lacks is skipped: its
// golden holds the answers of the recording host's machine.
func TestGoldens(t *testing.T) {
	traces, err := filepath.Glob("../testdata/traces/*.trace")
	if err != nil || len(traces) == 0 {
		t.Fatalf("no traces: %v", err)
	}
	for _, path := range traces {
		name := strings.TrimSuffix(filepath.Base(path), ".trace")
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile(strings.TrimSuffix(path, ".trace") + ".golden")
			if err != nil {
				t.Skipf("no golden: %v", err)
			}
			skipUnmet(t, path)
			got := runFile(t, path)
			if d := trace.Diff(string(want), got); d != "" {
				t.Errorf("model output differs from the live golden:\n%s", d)
			}
		})
	}
}

// A golden whose trace requires machine features ("# requires:") holds the
// answers of a machine with them: the model, which can be any machine,
// gives the same on every host when built with them (trace.RequiredFeatures
// over this host's other features).
func TestGoldensOnTheirMachines(t *testing.T) {
	traces, err := filepath.Glob("../testdata/traces/*.trace")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, path := range traces {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(src, []byte(trace.RequiresPrefix)) {
			continue
		}
		n++
		t.Run(strings.TrimSuffix(filepath.Base(path), ".trace"), func(t *testing.T) {
			f, err := trace.RequiredFeatures(src, machine.Host().Features)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(strings.TrimSuffix(path, ".trace") + ".golden")
			if err != nil {
				t.Fatal(err)
			}
			p, err := trace.Parse(bytes.NewReader(src))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := Run(context.Background(), f, p, &out); err != nil {
				t.Fatal(err)
			}
			if d := trace.Diff(string(want), out.String()); d != "" {
				t.Errorf("model on %+v differs from the live golden:\n%s", f, d)
			}
		})
	}
	if n < 2 {
		t.Errorf("%d traces with %s lines; want at least the two mmap_min_addr_4096 ones", n, trace.RequiresPrefix)
	}
}

// skipUnmet skips the test when the trace at path requires machine features
// (trace.Unmet) that this host does not have.
func skipUnmet(t *testing.T, path string) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	unmet, err := trace.Unmet(src, machine.Host().Features)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if unmet != "" {
		t.Skipf("the golden was %s: the model follows this host's machine", unmet)
	}
}

func runFile(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := trace.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Run(context.Background(), machine.Host().Features, p, &out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}
