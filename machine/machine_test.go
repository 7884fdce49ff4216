package machine

import (
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"testing"
)

// procTree is a fake /proc: the files readHost reads, by path under the
// root. A file left out is absent.
type procTree map[string]string

const (
	// Two CPUs' entries: readHost reads the first flags line.
	cpuinfoPKU = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu vme sse2 pku ospke la57 avx2\n\n" +
		"processor\t: 1\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu vme sse2 pku ospke la57 avx2\n\n"
	// A CPU with protection keys that the kernel left off (nopku).
	cpuinfoPKUOff = "processor\t: 0\nflags\t\t: fpu vme sse2 pku avx2\n\n"
	cpuinfoNone   = "processor\t: 0\nflags\t\t: fpu vme sse2 avx2\n\n"
	// CapEff of root in the initial namespace: bits 0-40, CAP_SYS_RAWIO
	// (17) among them.
	statusRoot = "Name:\tmmlab\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\n"
	// Every capability but CAP_SYS_RAWIO (bit 17 clear: 0x...fdffff).
	statusNoRawio = "Name:\tmmlab\nCapEff:\t000001fffffdffff\n"
	uidMapInitial = "         0          0 4294967295\n"
	// Root of a user namespace mapped onto uid 100000 (a rootless
	// container).
	uidMapChild = "         0     100000      65536\n"
	config      = "#\n# Automatically generated file; DO NOT EDIT.\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n" +
		"# CONFIG_PREEMPT_NONE is not set\nCONFIG_PREEMPT_VOLUNTARY=y\n# CONFIG_PREEMPT is not set\nCONFIG_PREEMPT_DYNAMIC=y\n" +
		"CONFIG_LSM_MMAP_MIN_ADDR=65536\n"
)

// write creates the tree under a new temporary directory, config.gz
// gzipped, and returns the directory.
func (p procTree) write(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for name, text := range p {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if name == "config.gz" {
			zw := gzip.NewWriter(f)
			if _, err := zw.Write([]byte(text)); err != nil {
				t.Fatal(err)
			}
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
		} else if _, err := f.WriteString(text); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// with returns a copy of p with the files of q added or replaced; an
// empty text removes the file.
func (p procTree) with(q procTree) procTree {
	r := procTree{}
	for k, v := range p {
		r[k] = v
	}
	for k, v := range q {
		if v == "" {
			delete(r, k)
		} else {
			r[k] = v
		}
	}
	return r
}

// full is a host with every feature: ospke, la57, root with
// CAP_SYS_RAWIO in the initial namespace, a config.gz.
var full = procTree{
	"cpuinfo":              cpuinfoPKU,
	"sys/vm/mmap_min_addr": "4096\n",
	"self/status":          statusRoot,
	"self/uid_map":         uidMapInitial,
	"config.gz":            config,
	"cmdline":              "BOOT_IMAGE=/vmlinuz-6.18.44 root=/dev/vda1 ro console=ttyS0\n",
	"sys/kernel/osrelease": "6.18.44-fc\n",
	"meminfo":              "MemTotal:        4026532 kB\nMemFree:         1000000 kB\n",
}

func TestReadHost(t *testing.T) {
	root := full.write(t)
	d := readHost(root)
	want := Description{
		Name:     "host",
		Features: Features{OSPKE: true, LA57: true, MmapMinAddr: 4096, LSMMmapMinAddr: 65536, CapSysRawio: true},
		Kernel:   Kernel{Release: "6.18.44-fc", HZ: 250, Preempt: "voluntary", CPUs: runtime.NumCPU(), MemBytes: 4026532 << 10},
	}
	want.Source = "read from " + root + " of this host"
	if !reflect.DeepEqual(d, want) {
		t.Errorf("readHost =\n%+v\nwant\n%+v", d, want)
	}
	if d.Features.MinAddr() != 65536 {
		t.Errorf("MinAddr %d: want CONFIG_LSM_MMAP_MIN_ADDR 65536 over vm.mmap_min_addr 4096", d.Features.MinAddr())
	}
}

// Each feature follows its own file, and only it.
func TestReadHostFeatures(t *testing.T) {
	for _, c := range []struct {
		name   string
		change procTree
		check  func(d Description) bool
	}{
		{"ospke without la57", procTree{"cpuinfo": "processor\t: 0\nflags\t\t: fpu pku ospke avx2\n"}, func(d Description) bool { return d.Features.OSPKE && !d.Features.LA57 }},
		{"pku without ospke", procTree{"cpuinfo": cpuinfoPKUOff}, func(d Description) bool { return !d.Features.OSPKE && !d.Features.LA57 }},
		{"no pku", procTree{"cpuinfo": cpuinfoNone}, func(d Description) bool { return !d.Features.OSPKE && !d.Features.LA57 }},
		{"no cpuinfo", procTree{"cpuinfo": ""}, func(d Description) bool { return !d.Features.OSPKE && !d.Features.LA57 }},
		{"mmap_min_addr 65536", procTree{"sys/vm/mmap_min_addr": "65536\n"}, func(d Description) bool { return d.Features.MmapMinAddr == 65536 }},
		{"mmap_min_addr 0", procTree{"sys/vm/mmap_min_addr": "0\n"}, func(d Description) bool {
			return d.Features.MmapMinAddr == 0 && d.Features.MinAddr() == 65536
		}},
		{"CapEff without CAP_SYS_RAWIO", procTree{"self/status": statusNoRawio}, func(d Description) bool { return !d.Features.CapSysRawio }},
		{"CAP_SYS_RAWIO in a child user namespace", procTree{"self/uid_map": uidMapChild}, func(d Description) bool { return !d.Features.CapSysRawio }},
		{"no uid_map", procTree{"self/uid_map": ""}, func(d Description) bool { return !d.Features.CapSysRawio }},
		{"preempt= on the command line", procTree{"cmdline": "root=/dev/vda1 preempt=full ro\n"}, func(d Description) bool {
			return d.Kernel.Preempt == "full" && d.Kernel.HZ == 250
		}},
		{"CONFIG_PREEMPT_NONE", procTree{"config.gz": "CONFIG_HZ=1000\nCONFIG_PREEMPT_NONE=y\n"}, func(d Description) bool {
			return d.Kernel.Preempt == "none" && d.Kernel.HZ == 1000 && d.Features.LSMMmapMinAddr == 0
		}},
		{"CONFIG_PREEMPT", procTree{"config.gz": "CONFIG_HZ=300\nCONFIG_PREEMPT=y\n"}, func(d Description) bool { return d.Kernel.Preempt == "full" && d.Kernel.HZ == 300 }},
		{"CONFIG_PREEMPT_LAZY", procTree{"config.gz": "CONFIG_PREEMPT_LAZY=y\n"}, func(d Description) bool { return d.Kernel.Preempt == "lazy" && d.Kernel.HZ == 0 }},
		{"no config.gz", procTree{"config.gz": ""}, func(d Description) bool {
			return d.Kernel.HZ == 0 && d.Kernel.Preempt == "" && d.Features.LSMMmapMinAddr == 0 && d.Features.MinAddr() == 4096
		}},
		{"no config.gz, preempt= on the command line", procTree{"config.gz": "", "cmdline": "preempt=lazy\n"}, func(d Description) bool { return d.Kernel.Preempt == "lazy" }},
		{"no osrelease", procTree{"sys/kernel/osrelease": ""}, func(d Description) bool { return d.Kernel.Release == runtime.GOOS }},
	} {
		d := readHost(full.with(c.change).write(t))
		if !c.check(d) {
			t.Errorf("%s: %+v", c.name, d)
		}
	}
}

// Without any of the files (an OS without /proc), every feature is off
// and the kernel is the OS's name.
func TestReadHostNothing(t *testing.T) {
	d := readHost(t.TempDir())
	if d.Features != (Features{}) || d.Kernel.Release != runtime.GOOS || d.Kernel.HZ != 0 || d.Kernel.Preempt != "" || d.Name != "host" {
		t.Errorf("readHost of an empty tree = %+v", d)
	}
}

func TestNamed(t *testing.T) {
	names := Names()
	if names[0] != "host" || len(names) < 2 {
		t.Fatalf("Names() = %v, want host first and the named descriptions", names)
	}
	for _, n := range names[1:] {
		d, err := Named(n)
		if err != nil || d.Name != n || d.Source == "" {
			t.Errorf("Named(%q) = %+v, %v", n, d, err)
		}
		if l, err := Lookup(n); err != nil || !reflect.DeepEqual(l, d) {
			t.Errorf("Lookup(%q) = %+v, %v; want Named's %+v", n, l, err, d)
		}
		if !reflect.DeepEqual(MustNamed(n), d) {
			t.Errorf("MustNamed(%q) differs from Named", n)
		}
	}
	if d, err := Lookup("host"); err != nil || !reflect.DeepEqual(d, Host()) {
		t.Errorf("Lookup(host) = %+v, %v; want Host()", d, err)
	}
	for _, bad := range []string{"nosuch", "host", "", "X86-64"} {
		if _, err := Named(bad); !errors.Is(err, ErrUnknown) {
			t.Errorf("Named(%q): %v, want ErrUnknown", bad, err)
		}
	}
	if _, err := Lookup("nosuch"); !errors.Is(err, ErrUnknown) {
		t.Errorf("Lookup(nosuch): %v, want ErrUnknown", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("MustNamed(nosuch) did not panic")
		}
	}()
	MustNamed("nosuch")
}

// The named descriptions differ in the features their names say.
func TestNamedFeatures(t *testing.T) {
	x86, pku, la57 := MustNamed("x86-64").Features, MustNamed("x86-64-pku").Features, MustNamed("x86-64-la57").Features
	if x86.OSPKE || x86.LA57 || !pku.OSPKE || pku.LA57 || !la57.OSPKE || !la57.LA57 {
		t.Errorf("x86-64 %+v, x86-64-pku %+v, x86-64-la57 %+v", x86, pku, la57)
	}
	if !slices.Equal(Names(), []string{"host", "x86-64", "x86-64-pku", "x86-64-la57", "epyc-vm-32", "xeon-gold-6138-2s", "xeon-gold-6138-2s-interleaved", "virtme-ng-4"}) {
		t.Errorf("Names() = %v", Names())
	}
}

func TestMinAddr(t *testing.T) {
	for _, c := range []struct {
		dac, lsm, want uint64
	}{{4096, 65536, 65536}, {65536, 0, 65536}, {0, 0, 0}, {131072, 65536, 131072}} {
		if got := (Features{MmapMinAddr: c.dac, LSMMmapMinAddr: c.lsm}).MinAddr(); got != c.want {
			t.Errorf("MinAddr(dac %d, lsm %d) = %d, want %d", c.dac, c.lsm, got, c.want)
		}
	}
}

func TestTaskSize(t *testing.T) {
	if got := (Features{}).TaskSize(); got != 0x7ffffffff000 {
		t.Errorf("4-level TaskSize %#x, want 0x7ffffffff000", got)
	}
	if got := (Features{LA57: true}).TaskSize(); got != 0xfffffffffff000 {
		t.Errorf("5-level TaskSize %#x, want 0xfffffffffff000", got)
	}
	if DefaultMapWindow != (Features{}).TaskSize() {
		t.Errorf("DefaultMapWindow %#x is not the 4-level TaskSize", uint64(DefaultMapWindow))
	}
}

// An UnsupportedError, wrapped or not, is ErrNotSupported, and says what is
// missing and since which release.
func TestUnsupportedError(t *testing.T) {
	err := fmt.Errorf("mapslock: %w", &UnsupportedError{What: "this kernel has no PROCMAP_QUERY", MinKernel: "6.11"})
	if !errors.Is(err, ErrNotSupported) {
		t.Errorf("%v is not ErrNotSupported", err)
	}
	var ue *UnsupportedError
	if !errors.As(err, &ue) || ue.MinKernel != "6.11" {
		t.Errorf("errors.As found %+v", ue)
	}
	if got, want := err.Error(), "mapslock: not supported here: this kernel has no PROCMAP_QUERY (Linux 6.11+)"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if errors.Is(errors.New("not supported here"), ErrNotSupported) {
		t.Error("a look-alike message is not the sentinel")
	}
}
