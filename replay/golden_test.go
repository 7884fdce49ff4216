package replay

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mmlab/machine"
	"mmlab/mm"
	"mmlab/trace"
)

// goldenSettings are the machines the model replays every golden on: one
// without protection keys and one with, whatever this host has.
var goldenSettings = []machine.Description{machine.MustNamed("x86-64"), machine.MustNamed("x86-64-pku")}

// TestGoldens replays every trace of testdata/traces on the model and
// compares with its goldens, recorded from the live kernel. A trace with
// one golden must give it on both goldenSettings. A trace whose output
// depends on features (trace.DependsPrefix) gives each recorded golden on
// the machine its setting names, on every host; a setting of goldenSettings
// not recorded yet is skipped, saying so.
func TestGoldens(t *testing.T) {
	t.Parallel()
	traces, err := filepath.Glob("../testdata/traces/*.trace")
	if err != nil || len(traces) == 0 {
		t.Fatalf("no traces: %v", err)
	}
	for _, path := range traces {
		name := strings.TrimSuffix(filepath.Base(path), ".trace")
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		keys, err := trace.Depends(src)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(keys) == 0 {
			for _, d := range goldenSettings {
				t.Run(name+"/"+d.Name, func(t *testing.T) {
					want, err := os.ReadFile(strings.TrimSuffix(path, ".trace") + ".golden")
					if err != nil {
						t.Fatalf("%v (record it with go test ./live/replay -run TestGoldens -update)", err)
					}
					compare(t, src, d.Features, want)
				})
			}
			continue
		}
		recorded := map[string]bool{}
		for _, g := range trace.Goldens(path) {
			recorded[g.Setting] = true
			t.Run(name+"/"+g.Setting, func(t *testing.T) {
				f, err := trace.SettingFeatures(g.Setting, goldenSettings[0].Features)
				if err != nil {
					t.Fatal(err)
				}
				want, err := os.ReadFile(g.Path)
				if err != nil {
					t.Fatal(err)
				}
				compare(t, src, f, want)
			})
		}
		for _, d := range goldenSettings {
			if s := trace.Setting(d.Features, keys); !recorded[s] {
				recorded[s] = true
				t.Run(name+"/"+s, func(t *testing.T) {
					t.Skipf("no golden recorded on a host of setting %s yet (go test ./live/replay -run TestGoldens -update there); mm's tests pin its rules", s)
				})
			}
		}
	}
}

// compare replays the trace src on the model of a machine with features f,
// in every design of mm.GapFixes, and compares each output with the golden
// want.
func compare(t *testing.T, src []byte, f machine.Features, want []byte) {
	t.Helper()
	p, err := trace.Parse(bytes.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range mm.GapFixes.Values() {
		var out bytes.Buffer
		if err := RunWith(context.Background(), f, mm.Config{GapFix: g}, p, &out); err != nil {
			t.Fatal(err)
		}
		if d := trace.Diff(string(want), out.String()); d != "" {
			t.Errorf("model (%s) on %+v differs from the live golden:\n%s", g, f, d)
		}
	}
}
