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

// goldenSettings are the machines the model replays every golden on: one
// without protection keys and one with, whatever this host has.
var goldenSettings = []machine.Description{machine.MustNamed("x86-64"), machine.MustNamed("x86-64-pku")}

// TestGoldens replays every trace of testdata/traces on the model under
// each setting and compares with its golden output, recorded from the live
// kernel: a trace with one golden must give it under both settings; a trace
// with one golden per setting gives each, where it has been recorded.
func TestGoldens(t *testing.T) {
	traces, err := filepath.Glob("../testdata/traces/*.trace")
	if err != nil || len(traces) == 0 {
		t.Fatalf("no traces: %v", err)
	}
	for _, path := range traces {
		name := strings.TrimSuffix(filepath.Base(path), ".trace")
		for _, d := range goldenSettings {
			t.Run(name+"/"+trace.Setting(d.Features), func(t *testing.T) {
				golden, _ := trace.GoldenPath(path, d.Features)
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Skipf("no golden: %v (recorded live on a host of this kind when one is at hand)", err)
				}
				got := runFile(t, path, d.Features)
				if d := trace.Diff(string(want), got); d != "" {
					t.Errorf("model output differs from the live golden %s:\n%s", filepath.Base(golden), d)
				}
			})
		}
	}
}

func runFile(t *testing.T, path string, f machine.Features) string {
	t.Helper()
	src, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p, err := trace.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Run(context.Background(), f, p, &out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}
