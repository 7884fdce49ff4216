package machine

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// Topology is how a machine's CPUs are laid out: what decides how far a
// cache line travels between two of them.
type Topology struct {
	Sockets        int `json:"sockets"`
	CoresPerSocket int `json:"cores_per_socket"`
	ThreadsPerCore int `json:"threads_per_core"`
	// CoresPerLLC is the cores that share one last-level cache: an AMD
	// CCX (8 cores on Zen 3 and Zen 4), the whole socket on Intel's mesh
	// (Skylake-SP and later).
	CoresPerLLC int `json:"cores_per_llc"`
	NUMANodes   int `json:"numa_nodes"`
	// CPUs is Sockets × CoresPerSocket × ThreadsPerCore: the logical
	// CPUs.
	CPUs int `json:"cpus"`
	// Numbering is the order in which Linux numbers the CPUs, that of
	// the firmware's ACPI MADT: NumberSocketMajor or NumberInterleaved
	// (Place).
	Numbering string `json:"numbering"`
	// Source says where the figures come from.
	Source string `json:"source"`
}

// The CPU numberings of Topology.Numbering.
const (
	// NumberSocketMajor numbers the first thread of every core of socket
	// 0, then of socket 1 and so on, then the second threads in the same
	// order: CPUs c and c+Sockets×CoresPerSocket are SMT siblings.
	NumberSocketMajor = "socket-major"
	// NumberInterleaved numbers the sockets' cores alternately: CPU c
	// sits on socket c mod Sockets, then as NumberSocketMajor within it.
	NumberInterleaved = "interleaved"
)

// Place returns where CPU c of t sits: its socket, its core in the socket
// and its thread in the core, as t.Numbering orders them. A CPU number of
// t.CPUs or more wraps around (c mod t.CPUs).
func (t Topology) Place(c int) (socket, core, thread int) {
	c %= t.CPUs
	perThread := t.Sockets * t.CoresPerSocket
	thread, c = c/perThread, c%perThread
	if t.Numbering == NumberInterleaved {
		return c % t.Sockets, c / t.Sockets, thread
	}
	return c / t.CoresPerSocket, c % t.CoresPerSocket, thread
}

// Clock is a CPU's clock.
type Clock struct {
	GHz    float64 `json:"ghz"`
	Source string  `json:"source"`
}

// Cost is one cost in nanoseconds and where the figure comes from: a
// publication, a vendor manual, or a calibrate measurement.
type Cost struct {
	NS     float64 `json:"ns"`
	Source string  `json:"source"`
	// Samples, where present, are measured costs of single events, in
	// nanoseconds: a simulated machine charges each event one drawn
	// uniformly from them by the run's seeded generator (a model
	// choice), and NS is their summary. Only calibrate's fork has them;
	// a named description's costs are single figures.
	Samples []float64 `json:"samples,omitempty"`
}

// Noise is what interrupts a CPU's task besides the events the costs
// price: interrupts (the tick's own work among them) and, on a virtual
// machine, the host's own work (a vCPU descheduled, VM exits), as the
// kernel's osnoise tracer counts them. A simulated CPU that runs a task
// loses an interruption at a mean rate, each lasting one of the measured
// durations: Poisson arrivals and durations drawn uniformly from the
// measured ones are model choices (the tick's part of the noise is
// periodic in the kernel), and an idle CPU loses nothing.
type Noise struct {
	// PerSecond is the interruptions per second of one CPU's busy time.
	PerSecond float64 `json:"per_second"`
	// NS are the interruptions' durations, in nanoseconds.
	NS     []float64 `json:"ns"`
	Source string    `json:"source"`
}

// String summarises n: its rate, its durations' median, 99th percentile
// and maximum, and its source; "none" for the zero Noise.
func (n Noise) String() string {
	if len(n.NS) == 0 {
		return "none (no figure at hand: a model choice)"
	}
	d := slices.Sorted(slices.Values(n.NS))
	q := func(p float64) float64 { return d[min(int(p*float64(len(d))), len(d)-1)] / 1e3 }
	return fmt.Sprintf("%.0f interruptions per second of a busy CPU, lasting %.1f µs (median), %.1f µs (99th percentile), %.1f µs at most (%s)",
		n.PerSecond, q(0.5), q(0.99), d[len(d)-1]/1e3, n.Source)
}

// check reports what makes n unusable: a rate without durations or a
// source, or a negative figure.
func (n Noise) check() error {
	switch {
	case n.PerSecond == 0 && len(n.NS) == 0:
		return nil
	case !(n.PerSecond > 0) || math.IsInf(n.PerSecond, 0) || len(n.NS) == 0 || n.Source == "":
		return fmt.Errorf("noise: %v per second, %d durations, source %q", n.PerSecond, len(n.NS), n.Source)
	}
	for _, d := range n.NS {
		if !(d > 0) || math.IsInf(d, 0) {
			return fmt.Errorf("noise: a duration of %v ns", d)
		}
	}
	return nil
}

// PostIdle is what a CPU's first kernel work costs beyond its price once
// the CPU has been idle, by how long: what the CPU lost while it slept
// and the work meets again (evicted cache lines and TLB entries; on a
// virtual machine the host ran its own work on the physical CPU, and a
// TLB miss under nested paging walks two page tables). calibrate measures
// it as openat(2)'s extra right after a sleep; a syscall that touches
// more (an mmap) meets more of it, so that it is a lower bound for those
// (a model choice). The zero PostIdle (every named description's) is
// none: no published figure is at hand.
type PostIdle struct {
	// Points are by increasing idle length; a simulated machine
	// interpolates between them (from nothing after no idle) and takes
	// the last beyond it (sched.SimCosts.PostIdle).
	Points []IdlePoint `json:"points"`
	Source string      `json:"source"`
}

// IdlePoint is one point of PostIdle: after an idle of IdleNS, the first
// kernel work costs ExtraNS more.
type IdlePoint struct {
	IdleNS  float64 `json:"idle_ns"`
	ExtraNS float64 `json:"extra_ns"`
}

// String summarises p: each point's extra and idle length, and its source;
// "none" for the zero PostIdle.
func (p PostIdle) String() string {
	if len(p.Points) == 0 {
		return "none (no figure at hand: a model choice)"
	}
	var b strings.Builder
	for i, q := range p.Points {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "+%.1f µs after %s", q.ExtraNS/1e3, idleLength(q.IdleNS))
	}
	return fmt.Sprintf("the first kernel work after an idle costs %s (%s)", b.String(), p.Source)
}

// idleLength writes ns in µs, or in ms from one.
func idleLength(ns float64) string {
	if ns >= 1e6 {
		return fmt.Sprintf("%g ms", ns/1e6)
	}
	return fmt.Sprintf("%g µs", ns/1e3)
}

// check reports what makes p unusable: points without a source, an idle
// length that is not positive or not above the one before, or an extra
// that is negative or not a number.
func (p PostIdle) check() error {
	if len(p.Points) == 0 {
		return nil
	}
	if p.Source == "" {
		return errors.New("post_idle has no source")
	}
	last := 0.0
	for _, q := range p.Points {
		switch {
		case !(q.IdleNS > last) || math.IsInf(q.IdleNS, 0):
			return fmt.Errorf("post_idle: an idle of %v ns after one of %v", q.IdleNS, last)
		case !(q.ExtraNS >= 0) || math.IsInf(q.ExtraNS, 0):
			return fmt.Errorf("post_idle: an extra of %v ns after %v ns idle", q.ExtraNS, q.IdleNS)
		}
		last = q.IdleNS
	}
	return nil
}

// Costs are what a simulated machine charges in virtual time. Each is one
// event on one CPU, in nanoseconds.
type Costs struct {
	// Instruction is one interpreted instruction: one cycle at the
	// clock, a model choice where no table per instruction class is at
	// hand.
	Instruction Cost `json:"instruction"`
	// KernelInstruction is one instruction of kernel software beyond a
	// system call's or trap's entry and exit (which Syscall and Int3
	// price): what the kernel paths that the model prices by their
	// instruction count cost (a uprobe hit, package uprobes). calibrate
	// fits it to one declared point, openat(2) and close(2) of /dev/null;
	// a machine without such a figure does not charge it (NotCharged).
	KernelInstruction Cost `json:"kernel_instruction"`
	// Int3 is the int3 exception entry and the IRET back: a breakpoint's
	// round trip through the kernel, without the handler's work.
	Int3 Cost `json:"int3"`
	// Syscall is a syscall/sysret round trip of a null system call, with
	// the machine's mitigations (Kernel.Mitigations).
	Syscall Cost `json:"syscall"`
	// PageFault is one anonymous minor fault on a 4 KiB page, the page's
	// zeroing included.
	PageFault Cost `json:"page_fault"`
	// ContextSwitch is one switch between two tasks on one CPU: half a
	// pipe round trip between two tasks on the same CPU, the pipe's write
	// and read included (as perf bench sched pipe counts it).
	ContextSwitch Cost `json:"context_switch"`
	// Wakeup is one sleep and wake-up through the scheduler across CPUs:
	// half a pipe round trip between two tasks on two CPUs, from the
	// waker's write to the wakee running.
	Wakeup Cost `json:"wakeup"`
	// IPI is one inter-processor interrupt, sent and handled.
	IPI Cost `json:"ipi"`
	// PopulatePage is the work of populating one 4 KiB page of an
	// anonymous MAP_POPULATE mapping (mm_populate: allocate, zero, map).
	PopulatePage Cost `json:"populate_page"`
	// LineSMT, LineLLC, LineSocket and LineRemote are the one-way
	// hand-off of a cache line, a compare-and-swap included, between two
	// CPUs: SMT siblings of one core, two cores sharing the last-level
	// cache, two cores of one socket with different last-level caches,
	// and two sockets. A class that the topology does not have (a
	// second socket on a one-socket machine) is zero.
	LineSMT    Cost `json:"line_smt"`
	LineLLC    Cost `json:"line_llc"`
	LineSocket Cost `json:"line_socket"`
	LineRemote Cost `json:"line_remote"`
	// LockedRMW is an uncontended locked read-modify-write (LOCK XADD,
	// LOCK CMPXCHG) on a line already in the CPU's cache; x86's smp_mb()
	// is one.
	LockedRMW Cost `json:"locked_rmw"`
	// Fork is the fixed kernel work of a fork of a minimal process, the
	// clone(2) syscall less the null syscall's round trip (Syscall):
	// copy_process(), dup_mm() and dup_mmap() of an address space of a
	// few VMAs and pages, and wake_up_new_task(). The child's run, exit
	// and reaping are not in it.
	Fork Cost `json:"fork"`
	// ForkPage is what each present 4 KiB PTE adds to a fork:
	// copy_pte_range()'s copy_present_pte() of one PTE, write-protecting
	// it in parent and child for COW and raising its page's reference and
	// map counts (the child's page-table pages amortised over the PTEs
	// they hold).
	ForkPage Cost `json:"fork_page"`
	// ZapPage is what each present 4 KiB PTE adds to an unmap (munmap,
	// MAP_FIXED over a mapping, exit): zap_pte_range() clearing it,
	// dropping its page's map count and, with the last reference, freeing
	// the page (the page-table pages' freeing amortised over the PTEs).
	ZapPage Cost `json:"zap_page"`
}

// Each calls f with each cost's JSON name and a pointer to it, in the
// order of the struct.
func (c *Costs) Each(f func(name string, cost *Cost)) {
	v := reflect.ValueOf(c).Elem()
	t := v.Type()
	for i := range t.NumField() {
		f(jsonName(t.Field(i)), v.Field(i).Addr().Interface().(*Cost))
	}
}

func jsonName(f reflect.StructField) string {
	name, _, _ := bytes.Cut([]byte(f.Tag.Get("json")), []byte(","))
	return string(name)
}

// lineClasses are the line costs that a topology may lack.
var lineClasses = map[string]bool{"line_smt": true, "line_llc": true, "line_socket": true, "line_remote": true}

// NotCharged, in a cost's source, says that the cost is deliberately
// zero: a simulated machine charges nothing for the event, a model choice
// where no figure is at hand. It is the one way besides a missing line
// class for a cost to be zero.
const NotCharged = "not charged (a model choice)"

// ErrCostMissing is Validate's error for a cost with neither a figure nor
// a source: a description (a calibration file) written before the cost
// existed.
var ErrCostMissing = errors.New("no such cost in the description")

// Validate reports the first cost of c that a simulated machine cannot
// charge: a value that is negative or not a number, a cost without a
// source (ErrCostMissing where the figure is zero too), or zero where only
// a missing line class or a source saying NotCharged may be.
func (c *Costs) Validate() error {
	var err error
	c.Each(func(name string, cost *Cost) {
		switch {
		case err != nil:
		case math.IsNaN(cost.NS) || math.IsInf(cost.NS, 0) || cost.NS < 0:
			err = fmt.Errorf("cost %s is %v ns", name, cost.NS)
		case cost.NS == 0 && cost.Source == "":
			err = fmt.Errorf("%w: %s", ErrCostMissing, name)
		case cost.Source == "":
			err = fmt.Errorf("cost %s (%v ns) has no source", name, cost.NS)
		case cost.NS == 0 && !lineClasses[name] && !strings.Contains(cost.Source, NotCharged):
			err = fmt.Errorf("cost %s is zero (%s)", name, cost.Source)
		case slices.ContainsFunc(cost.Samples, func(v float64) bool { return !(v >= 0) || math.IsInf(v, 0) }):
			err = fmt.Errorf("cost %s has a sample that is negative or not a number", name)
		}
	})
	return err
}

// named.json holds the named descriptions: data rather than a Go table so
// that the named machines and calibrate's host file are one schema, read
// by one strict decoder (an unknown or misspelt field is an error), and so
// that each figure sits beside its source where a reader checks them. An
// entry may take its costs, clock and mitigations from another by
// "costs_from".
//
//go:embed named.json
var namedJSON []byte

// namedEntry is one entry of named.json.
type namedEntry struct {
	Description
	CostsFrom string `json:"costs_from,omitempty"`
}

var namedOnce = sync.OnceValues(func() ([]Description, error) { return parseNamed(namedJSON) })

// parseNamed decodes and checks named.json.
func parseNamed(b []byte) ([]Description, error) {
	var entries []namedEntry
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&entries); err != nil {
		return nil, fmt.Errorf("named machines: %w", err)
	}
	raw := map[string]Description{}
	for _, e := range entries {
		if _, dup := raw[e.Name]; dup || e.Name == "host" {
			return nil, fmt.Errorf("named machine %q defined twice", e.Name)
		}
		raw[e.Name] = e.Description
	}
	var ds []Description
	for _, e := range entries {
		d := e.Description
		if e.CostsFrom != "" {
			from, ok := raw[e.CostsFrom]
			if !ok {
				return nil, fmt.Errorf("named machine %s: costs_from %q is not an entry", d.Name, e.CostsFrom)
			}
			d.Costs, d.Clock, d.Kernel.Mitigations = from.Costs, from.Clock, from.Kernel.Mitigations
		}
		if err := d.check(); err != nil {
			return nil, fmt.Errorf("named machine %s: %w", d.Name, err)
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// check reports what makes d unusable by a simulated machine.
func (d *Description) check() error {
	t := d.Topology
	switch {
	case d.Name == "" || d.Source == "":
		return errors.New("no name or no source")
	case t.Sockets < 1 || t.CoresPerSocket < 1 || t.ThreadsPerCore < 1 || t.CoresPerLLC < 1 || t.NUMANodes < 1:
		return fmt.Errorf("topology %+v", t)
	case t.CPUs != t.Sockets*t.CoresPerSocket*t.ThreadsPerCore || d.Kernel.CPUs > t.CPUs:
		return fmt.Errorf("topology has %d CPUs (%d×%d×%d), the kernel %d", t.CPUs, t.Sockets, t.CoresPerSocket, t.ThreadsPerCore, d.Kernel.CPUs)
	case t.Source == "":
		return errors.New("topology has no source")
	case t.Numbering != NumberSocketMajor && t.Numbering != NumberInterleaved:
		return fmt.Errorf("topology numbering %q: want %s or %s", t.Numbering, NumberSocketMajor, NumberInterleaved)
	case !(d.Clock.GHz > 0) || d.Clock.Source == "":
		return fmt.Errorf("clock %+v", d.Clock)
	}
	if err := d.Noise.check(); err != nil {
		return err
	}
	if err := d.PostIdle.check(); err != nil {
		return err
	}
	return d.Costs.Validate()
}

// ErrNotCalibrated is the error of Simulated("host") where this host has no
// calibrated description (or one of another kernel or CPU count): a
// simulated run on the host needs `mmlab calibrate` first.
var ErrNotCalibrated = errors.New("this host is not calibrated: run mmlab calibrate (Linux, root) first")

// HostFileEnv names the environment variable that, when set, is the path
// of the host's calibrated description instead of HostFile's default.
const HostFileEnv = "MMLAB_HOST_FILE"

// HostFile is where calibrate writes the host's description and where
// Simulated reads it: $MMLAB_HOST_FILE if set, otherwise mmlab/host.json
// under the user's configuration directory ($XDG_CONFIG_HOME, or
// ~/.config, on Linux: os.UserConfigDir).
func HostFile() (string, error) {
	if p := os.Getenv(HostFileEnv); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("where to keep the host's calibrated description: %w", err)
	}
	return filepath.Join(dir, "mmlab", "host.json"), nil
}

// Calibration is the file calibrate writes: the host's description, costs
// from measurements, and the measurements themselves.
type Calibration struct {
	Description Description `json:"description"`
	// Measurements are what calibrate measured, each with every run's
	// figure, including what the costs do not keep (each CPU pair's line
	// hand-off).
	Measurements []Measurement `json:"measurements"`
}

// Measurement is one of calibrate's measurements, repeated.
type Measurement struct {
	Name string `json:"name"`
	// What says what was timed and how.
	What string `json:"what"`
	// NS are the runs' figures, in nanoseconds per operation.
	NS []float64 `json:"ns"`
	// Median, Min and Max summarise NS.
	Median float64 `json:"median_ns"`
	Min    float64 `json:"min_ns"`
	Max    float64 `json:"max_ns"`
}

// ParseCalibration decodes a calibration file strictly and checks its
// description.
func ParseCalibration(b []byte) (Calibration, error) {
	var c Calibration
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Calibration{}, err
	}
	if err := c.Description.check(); err != nil {
		return Calibration{}, err
	}
	if c.Description.Noise.Source == "" {
		return Calibration{}, fmt.Errorf("%w: noise", ErrCostMissing)
	}
	return c, nil
}

// Marshal encodes c as the indented JSON that ParseCalibration reads.
func (c Calibration) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(c, "", "  ")
	return append(b, '\n'), err
}

// LoadHost reads the calibrated description at path and checks that it is
// of this host as it runs now: the same kernel release and the same online
// CPUs (where sysfs says; not the CPUs this process may use, which taskset
// narrows). Its features are Host()'s (read now, as every run reads them).
// A missing file, one without a cost this mmlab charges (ErrCostMissing),
// or one of another kernel or CPU count, is ErrNotCalibrated.
func LoadHost(path string) (Description, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Description{}, fmt.Errorf("%w (no %s)", ErrNotCalibrated, path)
	}
	if err != nil {
		return Description{}, err
	}
	c, err := ParseCalibration(b)
	if errors.Is(err, ErrCostMissing) {
		// Written by an mmlab that did not measure every cost this one
		// charges: calibrating again is the remedy.
		return Description{}, fmt.Errorf("%w: %s: %w (an older mmlab calibrate wrote it)", ErrNotCalibrated, path, err)
	}
	if err != nil {
		return Description{}, fmt.Errorf("%s: %w (mmlab calibrate writes it anew)", path, err)
	}
	d, h := c.Description, Host()
	cpus := d.Topology.CPUs
	if t, _, err := ReadTopology("/sys"); err == nil {
		cpus = t.CPUs
	}
	if d.Kernel.Release != h.Kernel.Release || d.Topology.CPUs != cpus {
		return Description{}, fmt.Errorf("%w: %s was calibrated on %s with %d CPUs, this host runs %s with %d", ErrNotCalibrated,
			path, d.Kernel.Release, d.Topology.CPUs, h.Kernel.Release, cpus)
	}
	d.Name, d.Features = "host", h.Features
	return d, nil
}

// Simulated returns the description a simulated machine runs on for
// --machine name: a named description, or for "host" the calibrated one at
// HostFile (ErrNotCalibrated without it). Unlike Lookup, it never returns a
// description without costs.
func Simulated(name string) (Description, error) {
	if name != "host" {
		return Named(name)
	}
	path, err := HostFile()
	if err != nil {
		return Description{}, fmt.Errorf("%w: %v", ErrNotCalibrated, err)
	}
	return LoadHost(path)
}
