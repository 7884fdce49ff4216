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
				if requires(t, path) {
					t.Skip("a trace that requires machine features runs on them: TestGoldensOnTheirMachines")
				}
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

// requires reports whether the trace at path names machine features it
// requires (trace.RequiresPrefix).
func requires(t *testing.T, path string) bool {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(src, []byte(trace.RequiresPrefix))
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
