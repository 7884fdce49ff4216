package main

import (
	"context"
	"strings"
	"testing"

	"mmlab/report"
)

// The model forkstall adds one result per (case, mode, design), before and
// after side by side, and the seed's table prints both columns.
func TestModelForkstallResults(t *testing.T) {
	f, err := parseForkstall([]string{"--target", "model", "--runs", "1", "--cases", "idle-1000", "--modes", "multi-1,perf-4"})
	if err != nil {
		t.Fatal(err)
	}
	doc := report.New("forkstall", nil)
	if err := runModelForkstall(context.Background(), f, doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Results) != 4 {
		t.Fatalf("%d results, want 4", len(doc.Results))
	}
	for i, r := range doc.Results {
		wantMode := []string{"multi-1", "multi-1", "perf-4", "perf-4"}[i]
		wantVariant := []string{"before", "after"}[i%2]
		if r["target"] != report.TargetModel || r["variant"] != wantVariant || r["case"] != "idle-1000" || r["mode"] != wantMode {
			t.Errorf("result %d: %v %v %v %v", i, r["target"], r["variant"], r["case"], r["mode"])
		}
		if a, _ := r["attach_ms"].(float64); a <= 0 {
			t.Errorf("result %d: attach_ms %v", i, r["attach_ms"])
		}
	}
	var out strings.Builder
	printForkstall(&out, doc)
	if !strings.Contains(out.String(), "before   after") || !strings.Contains(out.String(), "1000 processes map the file") {
		t.Errorf("table:\n%s", out.String())
	}
}
