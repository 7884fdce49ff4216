package calibrate

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"mmlab/machine"
)

func TestSummarize(t *testing.T) {
	m := Summarize("x", "what", []float64{5, 1, 3, 2})
	if m.Median != 2.5 || m.Min != 1 || m.Max != 5 || !reflect.DeepEqual(m.NS, []float64{5, 1, 3, 2}) {
		t.Errorf("Summarize = %+v", m)
	}
	if s := Spread(m); s != 4/2.5 {
		t.Errorf("Spread = %v", s)
	}
	if m := Summarize("x", "", []float64{7, 1, 3}); m.Median != 3 {
		t.Errorf("odd median %v", m.Median)
	}
	if !math.IsNaN(Spread(machine.Measurement{})) {
		t.Error("the spread of nothing is a number")
	}
}

// The int3 delta is the published one, each vendor's with its CPU named.
func TestInt3Delta(t *testing.T) {
	amd, amdSrc := Int3Delta("AuthenticAMD")
	intel, intelSrc := Int3Delta("GenuineIntel")
	if amd != 122 || intel != 164 || amdSrc == "" || intelSrc == "" {
		t.Errorf("Int3Delta: %v %q, %v %q", amd, amdSrc, intel, intelSrc)
	}
}

// Pairs takes up to perClass pairs of each distance class.
func TestPairs(t *testing.T) {
	locs := map[int]machine.CPULocation{
		0: {Package: 0, Core: 0, LLC: "a"}, 1: {Package: 0, Core: 1, LLC: "a"}, 2: {Package: 0, Core: 2, LLC: "b"},
		3: {Package: 1, Core: 0, LLC: "c"}, 4: {Package: 0, Core: 0, LLC: "a"},
	}
	got := Pairs([]int{0, 1, 2, 3, 4}, locs, 1)
	want := map[string][][2]int{
		machine.SameCore: {{0, 4}}, machine.SameLLC: {{0, 1}}, machine.SameSocket: {{0, 2}}, machine.Remote: {{0, 3}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Pairs = %v, want %v", got, want)
	}
	if got := Pairs([]int{0, 9}, locs, 4); len(got) != 0 {
		t.Errorf("a CPU without a location paired: %v", got)
	}
}

// Write replaces the file whole and leaves no temporary file; a file it
// cannot write is an error naming it.
func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mmlab")
	path := filepath.Join(dir, "host.json")
	c := machine.Calibration{Description: machine.MustNamed("x86-64"), Measurements: []machine.Measurement{Summarize("syscall", "test", []float64{1, 2})}}
	c.Description.Noise = machine.Noise{PerSecond: 100, NS: []float64{5000}, Source: "test"}
	if err := Write(path, c); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	back, err := machine.ParseCalibration(b)
	if err != nil || !reflect.DeepEqual(back, c) {
		t.Errorf("read back %+v, %v", back, err)
	}
	if files, _ := os.ReadDir(dir); len(files) != 1 {
		t.Errorf("left in %s: %v", dir, files)
	}
	if err := Write(filepath.Join(path, "under-a-file"), c); err == nil {
		t.Error("writing under a regular file: no error")
	}
	if errors.Is(err, machine.ErrNotSupported) {
		t.Error("a write error is not ErrNotSupported")
	}
}
