package uprobes

import (
	"context"
	"testing"
)

// AttachCost measures every (flavour, mode, n) once per run, in turn, and
// leaves no uprobe behind.
func TestAttachCost(t *testing.T) {
	runs, err := AttachCost(context.Background(), AttachConfig{Flavors: []string{SRCU, TasksTrace},
		Modes: []string{ModeMulti, ModePerf}, Ns: []int{1, 4}, Runs: 2, Procs: 3, CPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2*2*2*2 {
		t.Fatalf("%d runs, want 16", len(runs))
	}
	for i, r := range runs {
		if r.Flavor != []string{SRCU, TasksTrace}[i%2] || r.Attach <= 0 || r.Detach <= 0 {
			t.Errorf("run %d: %+v", i, r)
		}
	}
	if _, err := AttachCost(context.Background(), AttachConfig{Flavors: []string{SRCU}, Modes: []string{"x"}, Ns: []int{1}, Runs: 1}); err == nil {
		t.Error("unknown mode accepted")
	}
}
