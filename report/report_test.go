package report

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

func TestStats(t *testing.T) {
	if got := Median([]float64{5, 1, 3, 2}); got != 2 {
		t.Errorf("Median even = %v, want lower middle 2", got)
	}
	if got := Median([]float64{5, 1, 3}); got != 3 {
		t.Errorf("Median odd = %v, want 3", got)
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) is not NaN")
	}
	m, s := MeanStddev([]float64{2, 4, 4, 4, 5, 5, 7, 9})
	if m != 5 || math.Abs(s-2.138) > 0.001 {
		t.Errorf("MeanStddev = %v, %v", m, s)
	}
}

func TestDocumentSchema(t *testing.T) {
	type row struct {
		Target    string  `json:"target"`
		Variant   string  `json:"variant"`
		ForkMaxMs float64 `json:"fork_max_ms"`
	}
	d := NewDocument[row]("x", map[string]any{"runs": 3})
	d.Results = append(d.Results, row{"model", "before", 1.5})
	var buf bytes.Buffer
	if err := d.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back["schema_version"] != float64(SchemaVersion) {
		t.Errorf("schema_version %v", back["schema_version"])
	}
	for _, k := range []string{"experiment", "machine", "params", "results"} {
		if _, ok := back[k]; !ok {
			t.Errorf("document lacks %q", k)
		}
	}
	mach := back["machine"].(map[string]any)
	for _, k := range []string{"kernel", "cpus", "mem_bytes", "go"} {
		if _, ok := mach[k]; !ok {
			t.Errorf("machine lacks %q", k)
		}
	}
	r := back["results"].([]any)[0].(map[string]any)
	if r["target"] != "model" || r["variant"] != "before" || r["fork_max_ms"] != 1.5 {
		t.Errorf("result = %v", r)
	}
}
