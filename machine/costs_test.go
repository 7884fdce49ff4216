package machine

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Every named description is complete: each cost has a source and a
// value, the topology adds up, the clock is known.
func TestNamedCosts(t *testing.T) {
	for _, n := range Names()[1:] {
		d := MustNamed(n)
		if err := d.check(); err != nil {
			t.Errorf("%s: %v", n, err)
		}
		d.Costs.Each(func(name string, c *Cost) {
			if c.Source == "" {
				t.Errorf("%s: cost %s has no source", n, name)
			}
			if c.NS == 0 && !(name == "line_remote" && d.Topology.Sockets == 1) && !strings.Contains(c.Source, NotCharged) {
				t.Errorf("%s: cost %s is zero", n, name)
			}
		})
		if d.Topology.Source == "" || d.Clock.Source == "" || d.Kernel.Mitigations == "" {
			t.Errorf("%s: a part without its source: %+v %+v %q", n, d.Topology, d.Clock, d.Kernel.Mitigations)
		}
	}
	vm, xeon := MustNamed("epyc-vm-32"), MustNamed("xeon-gold-6138-2s")
	if vm.Kernel.CPUs != 32 || vm.Kernel.HZ != 1000 || xeon.Kernel.CPUs != 80 || xeon.Topology.Sockets != 2 || xeon.Topology.ThreadsPerCore != 2 {
		t.Errorf("the seeds' machines: %+v %+v; %+v %+v", vm.Kernel, vm.Topology, xeon.Kernel, xeon.Topology)
	}
	// costs_from copies the costs, the clock and the mitigations.
	if x := MustNamed("x86-64"); !reflect.DeepEqual(x.Costs, xeon.Costs) || x.Clock != xeon.Clock || x.Kernel.Mitigations != xeon.Kernel.Mitigations {
		t.Errorf("x86-64 does not take xeon-gold-6138-2s's costs")
	}
}

// Where physics orders two costs, the named descriptions do too: a line
// travels further between sockets than within one, and a trap costs more
// than a syscall.
func TestNamedCostOrder(t *testing.T) {
	for _, n := range Names()[1:] {
		c := MustNamed(n).Costs
		if !(c.LineSMT.NS <= c.LineLLC.NS && c.LineLLC.NS <= c.LineSocket.NS) ||
			(c.LineRemote.NS != 0 && c.LineRemote.NS < c.LineSocket.NS) ||
			c.Int3.NS <= c.Syscall.NS || c.Instruction.NS >= c.LockedRMW.NS {
			t.Errorf("%s: %+v", n, c)
		}
	}
}

// named.json's decoding is strict, and a description without what a
// simulated machine needs is refused.
func TestParseNamedRejects(t *testing.T) {
	good := `[{"name":"a","source":"s","features":{"ospke":false,"la57":false,"mmap_min_addr":0,"cap_sys_rawio":false},` +
		`"kernel":{"release":"6.18","cpus":1},"topology":{"sockets":1,"cores_per_socket":1,"threads_per_core":1,"cores_per_llc":1,"numa_nodes":1,"cpus":1,"numbering":"socket-major","source":"s"},` +
		`"clock":{"ghz":1,"source":"s"},"costs":COSTS}]`
	var costs []string
	var c Costs
	c.Each(func(name string, _ *Cost) { costs = append(costs, `"`+name+`":{"ns":1,"source":"s"}`) })
	all := "{" + strings.Join(costs, ",") + "}"
	if ds, err := parseNamed([]byte(strings.Replace(good, "COSTS", all, 1))); err != nil || len(ds) != 1 {
		t.Fatalf("a complete entry: %v, %v", ds, err)
	}
	// A cost may carry samples of single events.
	sampled := strings.Replace(all, `"fork":{"ns":1,"source":"s"}`, `"fork":{"ns":1,"source":"s","samples":[0.5,1,30]}`, 1)
	if ds, err := parseNamed([]byte(strings.Replace(good, "COSTS", sampled, 1))); err != nil || len(ds) != 1 || !slices.Equal(ds[0].Costs.Fork.Samples, []float64{0.5, 1, 30}) {
		t.Errorf("a cost with samples: %v, %v", ds, err)
	}
	// A zero cost whose source says it is not charged is a model choice.
	notCharged := strings.Replace(all, `"fork":{"ns":1,"source":"s"}`, `"fork":{"ns":0,"source":"none at hand: `+NotCharged+`"}`, 1)
	if ds, err := parseNamed([]byte(strings.Replace(good, "COSTS", notCharged, 1))); err != nil || len(ds) != 1 {
		t.Errorf("a cost not charged: %v, %v", ds, err)
	}
	for _, c := range []struct{ name, json, want string }{
		{"unknown field", strings.Replace(strings.Replace(good, "COSTS", all, 1), `"name":"a"`, `"name":"a","colour":"red"`, 1), "unknown field"},
		{"cost without source", strings.Replace(strings.Replace(good, "COSTS", all, 1), `"syscall":{"ns":1,"source":"s"}`, `"syscall":{"ns":1,"source":""}`, 1), "syscall"},
		{"cost missing", strings.Replace(strings.Replace(good, "COSTS", all, 1), `"ipi":{"ns":1,"source":"s"},`, ``, 1), "ipi"},
		{"zero cost", strings.Replace(strings.Replace(good, "COSTS", all, 1), `"fork":{"ns":1,"source":"s"}`, `"fork":{"ns":0,"source":"s"}`, 1), "fork is zero"},
		{"negative cost", strings.Replace(strings.Replace(good, "COSTS", all, 1), `"int3":{"ns":1`, `"int3":{"ns":-1`, 1), "int3"},
		{"negative sample", strings.Replace(strings.Replace(good, "COSTS", all, 1), `"fork":{"ns":1,"source":"s"}`, `"fork":{"ns":1,"source":"s","samples":[1,-2]}`, 1), "fork has a sample"},
		{"topology", strings.Replace(strings.Replace(good, "COSTS", all, 1), `"sockets":1`, `"sockets":2`, 1), "topology"},
		{"no clock", strings.Replace(strings.Replace(good, "COSTS", all, 1), `"ghz":1`, `"ghz":0`, 1), "clock"},
		{"costs_from nowhere", strings.Replace(strings.Replace(good, "COSTS", all, 1), `"name":"a"`, `"name":"a","costs_from":"b"`, 1), "costs_from"},
		{"host", strings.Replace(strings.Replace(good, "COSTS", all, 1), `"name":"a"`, `"name":"host"`, 1), "twice"},
	} {
		if _, err := parseNamed([]byte(c.json)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
	}
}

// hostCalibration is a calibration of this host as Host() reads it, with
// xeon-gold-6138-2s's costs.
func hostCalibration() Calibration {
	d := Host()
	x := MustNamed("xeon-gold-6138-2s")
	d.Costs, d.Clock = x.Costs, x.Clock
	d.Topology = Topology{Sockets: 1, CoresPerSocket: d.Kernel.CPUs, ThreadsPerCore: 1, CoresPerLLC: d.Kernel.CPUs, NUMANodes: 1, CPUs: d.Kernel.CPUs, Numbering: NumberSocketMajor, Source: "test"}
	if t, _, err := ReadTopology("/sys"); err == nil {
		d.Topology = t
	}
	d.Noise = Noise{PerSecond: 1000, NS: []float64{2000, 30000}, Source: "test"}
	d.PostIdle = PostIdle{Points: []IdlePoint{{IdleNS: 50e3, ExtraNS: 1000}, {IdleNS: 1e6, ExtraNS: 6000}}, Source: "test"}
	return Calibration{Description: d, Measurements: []Measurement{{Name: "syscall", What: "test", NS: []float64{1, 2, 3}, Median: 2, Min: 1, Max: 3}}}
}

// A calibration file reads back as it was written.
func TestCalibrationRoundTrip(t *testing.T) {
	c := hostCalibration()
	b, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseCalibration(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("round trip:\n%+v\nwant\n%+v", back, c)
	}
	if _, err := ParseCalibration([]byte(strings.Replace(string(b), `"measurements"`, `"measurement"`, 1))); err == nil {
		t.Error("a misspelt field was accepted")
	}
}

// Simulated("host") is the calibrated file, and without one (or with one
// of another kernel) ErrNotCalibrated, whose message names mmlab
// calibrate; named descriptions need no file.
func TestSimulatedHost(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.json")
	t.Setenv(HostFileEnv, path)
	if p, err := HostFile(); err != nil || p != path {
		t.Fatalf("HostFile = %q, %v", p, err)
	}
	_, err := Simulated("host")
	if !errors.Is(err, ErrNotCalibrated) || !strings.Contains(err.Error(), "mmlab calibrate") || !strings.Contains(err.Error(), path) {
		t.Errorf("without a file: %v", err)
	}
	c := hostCalibration()
	c.Description.Name = "calibrated"
	b, _ := c.Marshal()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := Simulated("host")
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "host" || !reflect.DeepEqual(d.Costs, c.Description.Costs) || d.Features != Host().Features {
		t.Errorf("Simulated(host) = %+v", d)
	}
	c.Description.Kernel.Release = "2.6.32"
	b, _ = c.Marshal()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Simulated("host"); !errors.Is(err, ErrNotCalibrated) || !strings.Contains(err.Error(), "2.6.32") {
		t.Errorf("a calibration of another kernel: %v", err)
	}
	// A file calibrate wrote before fork was a cost: no "fork" key.
	c.Description.Kernel.Release = Host().Kernel.Release
	b, _ = c.Marshal()
	var file map[string]any
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	costs := file["description"].(map[string]any)["costs"].(map[string]any)
	delete(costs, "fork")
	delete(costs, "fork_page")
	if b, err = json.Marshal(file); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Simulated("host"); !errors.Is(err, ErrNotCalibrated) || !errors.Is(err, ErrCostMissing) ||
		!strings.Contains(err.Error(), "mmlab calibrate") || !strings.Contains(err.Error(), "fork") {
		t.Errorf("a calibration without fork: %v", err)
	}
	// One written before noise was measured: no "noise" key.
	b, _ = c.Marshal()
	file = nil
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	delete(file["description"].(map[string]any), "noise")
	if b, err = json.Marshal(file); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Simulated("host"); !errors.Is(err, ErrNotCalibrated) || !errors.Is(err, ErrCostMissing) || !strings.Contains(err.Error(), "noise") {
		t.Errorf("a calibration without noise: %v", err)
	}
	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Simulated("host"); err == nil || errors.Is(err, ErrNotCalibrated) {
		t.Errorf("a broken file: %v, want an error of its own", err)
	}
	if d, err := Simulated("epyc-vm-32"); err != nil || !reflect.DeepEqual(d, MustNamed("epyc-vm-32")) {
		t.Errorf("Simulated(epyc-vm-32) = %v", err)
	}
	if _, err := Simulated("nosuch"); !errors.Is(err, ErrUnknown) {
		t.Errorf("Simulated(nosuch): %v", err)
	}
}

func TestReadTopology(t *testing.T) {
	sys := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(sys, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// 2 sockets × 2 cores × 2 threads; CPUs n and n+4 are siblings; each
	// socket's cores in one L3.
	write("devices/system/cpu/online", "0-7")
	write("devices/system/node/online", "0-1")
	for c := range 8 {
		dir := "devices/system/cpu/cpu" + string(rune('0'+c)) + "/"
		pkg, core := (c%4)/2, c%2
		write(dir+"topology/physical_package_id", string(rune('0'+pkg)))
		write(dir+"topology/core_id", string(rune('0'+core)))
		write(dir+"cache/index3/shared_cpu_list", []string{"0-1,4-5", "2-3,6-7"}[pkg])
	}
	top, locs, err := ReadTopology(sys)
	if err != nil {
		t.Fatal(err)
	}
	want := Topology{Sockets: 2, CoresPerSocket: 2, ThreadsPerCore: 2, CoresPerLLC: 2, NUMANodes: 2, CPUs: 8, Numbering: NumberSocketMajor, Source: top.Source}
	if top != want {
		t.Errorf("ReadTopology = %+v, want %+v", top, want)
	}
	for _, c := range []struct {
		a, b int
		want string
	}{{0, 4, SameCore}, {0, 1, SameLLC}, {0, 2, Remote}, {3, 7, SameCore}} {
		if got := Distance(locs[c.a], locs[c.b]); got != c.want {
			t.Errorf("Distance(%d, %d) = %s, want %s", c.a, c.b, got, c.want)
		}
	}
	if _, _, err := ReadTopology(t.TempDir()); err == nil {
		t.Error("no sysfs: no error")
	}
}

func TestParseCPUList(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
	}{{"0", []int{0}}, {"0-3,8,10-11", []int{0, 1, 2, 3, 8, 10, 11}}, {"", nil}} {
		if got, err := ParseCPUList(c.in); err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseCPUList(%q) = %v, %v", c.in, got, err)
		}
	}
	for _, bad := range []string{"a", "3-1", "1-"} {
		if _, err := ParseCPUList(bad); err == nil {
			t.Errorf("ParseCPUList(%q): no error", bad)
		}
	}
}

func TestReadClockAndMitigations(t *testing.T) {
	if g := readClock("processor\t: 0\ncpu MHz\t\t: 2596.128\n"); g < 2.596 || g > 2.597 {
		t.Errorf("readClock = %v", g)
	}
	if g := readClock(cpuinfoNone); g != 0 {
		t.Errorf("readClock without cpu MHz = %v", g)
	}
	dir := t.TempDir()
	if m := readMitigations(dir); m != "" {
		t.Errorf("no files: %q", m)
	}
	os.WriteFile(filepath.Join(dir, "meltdown"), []byte("Mitigation: PTI\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "l1tf"), []byte("Not affected\n"), 0o644)
	if m := readMitigations(dir); m != "meltdown: Mitigation: PTI ("+dir+")" {
		t.Errorf("readMitigations = %q", m)
	}
}

// TestPlace pins both numberings on seed 004's machine (2 sockets × 20
// cores × 2 threads): socket-major puts CPUs 0-19 on socket 0 and CPU 40
// beside CPU 0; interleaved alternates the sockets.
func TestPlace(t *testing.T) {
	sm, il := MustNamed("xeon-gold-6138-2s").Topology, MustNamed("xeon-gold-6138-2s-interleaved").Topology
	type place struct{ socket, core, thread int }
	for _, c := range []struct {
		top  Topology
		cpu  int
		want place
	}{
		{sm, 0, place{0, 0, 0}}, {sm, 1, place{0, 1, 0}}, {sm, 19, place{0, 19, 0}}, {sm, 20, place{1, 0, 0}},
		{sm, 40, place{0, 0, 1}}, {sm, 79, place{1, 19, 1}}, {sm, 80, place{0, 0, 0}},
		{il, 0, place{0, 0, 0}}, {il, 1, place{1, 0, 0}}, {il, 2, place{0, 1, 0}}, {il, 39, place{1, 19, 0}},
		{il, 40, place{0, 0, 1}}, {il, 41, place{1, 0, 1}},
	} {
		s, k, th := c.top.Place(c.cpu)
		if got := (place{s, k, th}); got != c.want {
			t.Errorf("%s: Place(%d) = %+v, want %+v", c.top.Numbering, c.cpu, got, c.want)
		}
	}
}

// A noise is none, or a positive rate with durations and a source; the
// zero one is every named description's.
func TestNoiseCheck(t *testing.T) {
	for _, c := range []struct {
		n  Noise
		ok bool
	}{
		{Noise{}, true},
		{Noise{Source: "measured: none"}, true},
		{Noise{PerSecond: 10, NS: []float64{1000}, Source: "s"}, true},
		{Noise{PerSecond: 10, Source: "s"}, false},
		{Noise{PerSecond: 10, NS: []float64{1000}}, false},
		{Noise{NS: []float64{1000}, Source: "s"}, false},
		{Noise{PerSecond: 10, NS: []float64{0}, Source: "s"}, false},
		{Noise{PerSecond: -1, NS: []float64{1000}, Source: "s"}, false},
	} {
		if err := c.n.check(); (err == nil) != c.ok {
			t.Errorf("%+v: %v, want ok %v", c.n, err, c.ok)
		}
	}
	for _, n := range Names() {
		if n == "host" {
			continue
		}
		if d := MustNamed(n); !reflect.DeepEqual(d.Noise, Noise{}) {
			t.Errorf("%s has noise %v", n, d.Noise)
		}
	}
}

// A post-idle cost is none, or points of increasing idle length with
// extras of zero or more and a source; the zero one is every named
// description's, and a description with a bad one is refused.
func TestPostIdleCheck(t *testing.T) {
	pt := func(idle, extra float64) IdlePoint { return IdlePoint{IdleNS: idle, ExtraNS: extra} }
	for _, c := range []struct {
		p  PostIdle
		ok bool
	}{
		{PostIdle{}, true},
		{PostIdle{Points: []IdlePoint{pt(50e3, 1000), pt(250e3, 0)}, Source: "s"}, true},
		{PostIdle{Points: []IdlePoint{pt(50e3, 1000)}}, false},
		{PostIdle{Points: []IdlePoint{pt(0, 1000)}, Source: "s"}, false},
		{PostIdle{Points: []IdlePoint{pt(50e3, 1000), pt(50e3, 2000)}, Source: "s"}, false},
		{PostIdle{Points: []IdlePoint{pt(50e3, -1)}, Source: "s"}, false},
		{PostIdle{Points: []IdlePoint{pt(50e3, math.NaN())}, Source: "s"}, false},
		{PostIdle{Points: []IdlePoint{pt(math.Inf(1), 1)}, Source: "s"}, false},
	} {
		if err := c.p.check(); (err == nil) != c.ok {
			t.Errorf("%+v: %v, want ok %v", c.p, err, c.ok)
		}
	}
	for _, n := range Names() {
		if n == "host" {
			continue
		}
		if d := MustNamed(n); !reflect.DeepEqual(d.PostIdle, PostIdle{}) || d.PostIdle.String() != "none (no figure at hand: a model choice)" {
			t.Errorf("%s has a post-idle cost %v", n, d.PostIdle)
		}
	}
	c := hostCalibration()
	c.Description.PostIdle.Points[1].IdleNS = 10
	b, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseCalibration(b); err == nil {
		t.Error("a calibration whose post-idle points go back in idle length was accepted")
	}
	if s, want := hostCalibration().Description.PostIdle.String(), "the first kernel work after an idle costs +1.0 µs after 50 µs, +6.0 µs after 1 ms (test)"; s != want {
		t.Errorf("String() = %q, want %q", s, want)
	}
}
