package report

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"runtime"
	"testing"
	"time"

	"mmlab/machine"
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
	type params struct {
		Runs int `json:"runs"`
	}
	d := NewDocument[params, row]("x", machine.MustNamed("x86-64-pku"), params{3})
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
	if p := back["params"].(map[string]any); p["runs"] != 3.0 {
		t.Errorf("params = %v, want runs 3", p)
	}
	mach := back["machine"].(map[string]any)
	for _, k := range []string{"kernel", "cpus", "mem_bytes", "go"} {
		if _, ok := mach[k]; !ok {
			t.Errorf("machine lacks %q", k)
		}
	}
	if _, ok := mach["features"].(map[string]any)["ospke"]; !ok {
		t.Errorf("machine lacks the host's features: %v", mach)
	}
	model := back["model_machine"].(map[string]any)
	if model["name"] != "x86-64-pku" || model["features"].(map[string]any)["ospke"] != true {
		t.Errorf("model_machine = %v, want x86-64-pku with ospke", model)
	}
	r := back["results"].([]any)[0].(map[string]any)
	if r["target"] != "model" || r["variant"] != "before" || r["fork_max_ms"] != 1.5 {
		t.Errorf("result = %v", r)
	}
}

// A document of version 2 reads with its machine's fields and no machine
// description: ModelMachine and Machine.Features are nil, which the
// package comment says to read as the producing host, features unknown.
func TestReadVersion2(t *testing.T) {
	const v2 = `{"schema_version": 2, "experiment": "x",
	  "machine": {"kernel": "linux 6.18.44", "cpus": 2, "mem_bytes": 4294967296, "go": "go1.26.0", "hostname": "h", "hz": 250, "preempt": "none"},
	  "params": {"runs": 3}, "results": [{"target": "model", "variant": "before", "fork_max_ms": 1.5}]}`
	type row struct {
		Target    string  `json:"target"`
		ForkMaxMs float64 `json:"fork_max_ms"`
	}
	var d Document[struct {
		Runs int `json:"runs"`
	}, row]
	if err := json.Unmarshal([]byte(v2), &d); err != nil {
		t.Fatal(err)
	}
	want := Machine{Kernel: "linux 6.18.44", CPUs: 2, MemBytes: 4 << 30, Go: "go1.26.0", Hostname: "h", HZ: 250, Preempt: "none"}
	if d.SchemaVersion != 2 || d.Machine != want || d.ModelMachine != nil || len(d.Results) != 1 || d.Results[0].ForkMaxMs != 1.5 || d.Params.Runs != 3 {
		t.Errorf("read %+v, machine %+v; want version 2, machine %+v, no model machine, one result", d, d.Machine, want)
	}
}

func TestModelLabel(t *testing.T) {
	for _, c := range []struct {
		m    *ModelMachine
		want string
	}{
		{nil, "host (features not recorded: schema 2)"},
		{&ModelMachine{Name: "x86-64-la57", Features: machine.MustNamed("x86-64-la57").Features}, "x86-64-la57: ospke, la57, mmap_min_addr 65536, CAP_SYS_RAWIO"},
		{&ModelMachine{Name: "host", Features: machine.Features{MmapMinAddr: 4096}}, "host: mmap_min_addr 4096"},
	} {
		if got := ModelLabel(c.m); got != c.want {
			t.Errorf("ModelLabel(%+v) = %q, want %q", c.m, got, c.want)
		}
	}
}

// ThisMachine's fields are the host description's: the release after the
// OS's name, the kernel's figures, and the features.
func TestMachineOf(t *testing.T) {
	d := machine.Description{Name: "host", Features: machine.Features{OSPKE: true, MmapMinAddr: 65536},
		Kernel: machine.Kernel{Release: "6.18.44", HZ: 250, Preempt: "none", CPUs: 2, MemBytes: 4 << 30}}
	m := machineOf(d)
	if m.Kernel != runtime.GOOS+" 6.18.44" || m.CPUs != 2 || m.MemBytes != 4<<30 || m.HZ != 250 || m.Preempt != "none" ||
		m.Go != runtime.Version() || m.Features == nil || *m.Features != d.Features {
		t.Errorf("machineOf(%+v) = %+v", d, m)
	}
	d.Kernel.Release = runtime.GOOS // what Host gives where the release cannot be read
	if m := machineOf(d); m.Kernel != runtime.GOOS {
		t.Errorf("without a release: kernel %q, want %q", m.Kernel, runtime.GOOS)
	}
}

// A live run's steal is the CPUs whose steal time grew, in order, and it
// reads back from the document; a run without steal has none.
func TestSteal(t *testing.T) {
	ms := time.Millisecond
	before := map[int]time.Duration{0: 9970 * 10 * ms, 1: 10965 * 10 * ms, 2: 5 * ms}
	after := map[int]time.Duration{0: 10003 * 10 * ms, 1: 11000 * 10 * ms, 2: 5 * ms}
	s := StealDuring(before, after, 12*time.Second)
	want := &Steal{RunS: 12, CPUs: []CPUSteal{{0, 330}, {1, 350}}}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("steal %+v, want %+v", s, want)
	}
	if got, line := s.String(), "live: the hypervisor took CPU 0 330 ms (2.8%), CPU 1 350 ms (2.9%) of the live run's 12.0 s (steal time, /proc/stat)"; got != line {
		t.Errorf("line %q, want %q", got, line)
	}
	if s := StealDuring(after, after, time.Second); s != nil {
		t.Errorf("no steal: %+v", s)
	}
	type row struct {
		Target string `json:"target"`
	}
	d := NewDocument[struct{}, row]("x", machine.MustNamed("x86-64-pku"), struct{}{})
	d.Steal = want
	var buf bytes.Buffer
	if err := d.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := Read[struct{}, row](buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Steal, want) {
		t.Errorf("read back %+v, want %+v", back.Steal, want)
	}
}
