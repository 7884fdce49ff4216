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
// compares with its golden output, recorded from the live kernel.
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
			got := runFile(t, path)
			if d := trace.Diff(string(want), got); d != "" {
				t.Errorf("model output differs from the live golden:\n%s", d)
			}
		})
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
