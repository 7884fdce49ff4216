package main

import (
	"context"
	"testing"
	"time"

	"mmlab/report"
)

// The model trigger adds one result per (variant, case, cpus), grouped by
// variant, with the common schema's key fields and the paired ratio on the
// tasks-trace rows.
func TestModelTriggerResults(t *testing.T) {
	f := triggerFlags{target: "model", variants: []string{"srcu", "tasks-trace"}, cpus: []int{1},
		cases: []string{"nop", "uprobe-nop"}, warmup: time.Millisecond, duration: 4 * time.Millisecond,
		interval: 2 * time.Millisecond, json: true}
	doc := report.New("trigger", nil)
	if err := runModelTrigger(context.Background(), f, doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Results) != 4 {
		t.Fatalf("%d results, want 4", len(doc.Results))
	}
	for i, r := range doc.Results {
		want := []string{"srcu", "srcu", "tasks-trace", "tasks-trace"}[i]
		if r["target"] != report.TargetModel || r["variant"] != want || r["attach"] != "model" || r["cpus"] != 1 {
			t.Errorf("result %d: %v", i, r)
		}
		if m, _ := r["mops"].(float64); m <= 0 {
			t.Errorf("result %d: mops %v", i, r["mops"])
		}
		if _, ok := r["ratio_vs_srcu"]; ok != (want == "tasks-trace") {
			t.Errorf("result %d: ratio_vs_srcu present %v", i, ok)
		}
	}
}

// The model attach adds one result per (variant, attach, n).
func TestModelAttachResults(t *testing.T) {
	f := attachFlags{target: "model", modes: []string{"uprobe_multi", "perf"}, ns: []int{1, 4}, runs: 2}
	doc := report.New("attach", map[string]any{})
	if err := runModelAttach(context.Background(), f, doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Results) != 2*2*2 {
		t.Fatalf("%d results, want 8", len(doc.Results))
	}
	for _, r := range doc.Results {
		if r["target"] != report.TargetModel || len(r["attach_ms_runs"].([]float64)) != 2 || r["detach_ms"].(float64) <= 0 {
			t.Errorf("%v", r)
		}
	}
}
