package seeds

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"mmlab/experiment"
	"mmlab/experiment/trigger"
	"mmlab/machine"
	"mmlab/report"
)

// Seed 004's trigger part has a column per model variant, the seed-era
// ones compared with the seed's scaling and flavour ratio.
func TestSeed004TriggerPart(t *testing.T) {
	doc := report.NewDocument[*trigger.Options, trigger.Result]("trigger", machine.MustNamed("x86-64"), trigger.NewOptions())
	for _, v := range []string{"srcu", "tasks-trace", "v6.14+"} {
		for _, n := range []int{1, 2} {
			r := trigger.NewResult(experiment.Row{Target: experiment.Model, Variant: v}, trigger.AttachModel, "uprobe-nop", n,
				[]float64{float64(n) * 1e6}, 1, 1)
			r.PerCPU = &trigger.PerCPU{MopsCPU: float64(n) * 1.5}
			doc.Results = append(doc.Results, r)
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var s004 *Seed
	for _, s := range All() {
		if s.ID == "004" {
			s004 = s
		}
	}
	var d report.Document[trigger.Options, trigger.Result]
	if !decode(Docs{"trigger": b}, "trigger", &d) {
		t.Fatal("document does not decode")
	}
	part, _ := s004.triggerPart(&d)
	cols := part.Tables[0].Columns
	for _, want := range []string{"model srcu (v6.12)", "model tasks-trace (v6.12)", "model v6.14+"} {
		if !slices.Contains(cols, want) {
			t.Errorf("columns %q lack %q", cols, want)
		}
	}
	notes := strings.Join(part.Notes, "\n")
	for _, want := range []string{
		"model uprobe-nop per CPU-second, 2 CPUs / 1: srcu 2.00x, tasks-trace 2.00x, v6.14+ 2.00x (the seed: 1.26x SRCU, 1.26x Tasks Trace)",
		"model tasks-trace/srcu (the seed's era), uprobe-nop on 1 CPU: 1.000 (the seed: 1.037)",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
}
