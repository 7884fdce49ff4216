package procmaps

import (
	"os"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"mmlab/host"
	"mmlab/uapi"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// benchVMAs is the size of the process the benchmarks read: this process
// with 30,000 more VMAs (alternating RW/R pages never merge).
const benchVMAs = 30000

var (
	benchOnce sync.Once
	benchMem  []byte
	benchErr  error
)

func benchSetup(b *testing.B) *Reader {
	b.Helper()
	benchOnce.Do(func() { benchMem, benchErr = mapAlternating(benchVMAs) })
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	r := open(b, os.Getpid())
	n := 0
	if err := r.Walk(func(*uapi.VMA) bool { n++; return true }); err != nil {
		b.Fatal(err)
	}
	if n < benchVMAs {
		b.Fatalf("%d VMAs, want at least %d", n, benchVMAs)
	}
	return r
}

// benchMidAddr is an address in the middle of benchSetup's 30,000 VMAs.
func benchMidAddr() uint64 {
	return uint64(uintptr(unsafe.Pointer(&benchMem[len(benchMem)/2])))
}

// readText reads the whole maps text from fd, a read() into buf at a time
// from offset 0, and drops it: the cost of the text without any parsing.
func readText(b *testing.B, fd int, buf []byte) {
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		b.Fatal(err)
	}
	for {
		n, err := unix.Read(fd, buf)
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

// BenchmarkReadAll reads every VMA of a process with 30,000 VMAs, five ways:
// a bare read() of the text into one buffer (the limit: no parsing), Walk,
// WalkQuery with names, and prometheus/procfs ProcMaps. vmas/op is the
// number of VMAs each pass saw.
func BenchmarkReadAll(b *testing.B) {
	r := benchSetup(b)
	b.Run("bare-read", func(b *testing.B) {
		buf := make([]byte, textBufSize)
		b.ReportAllocs()
		defer cpuTimer(b, "cpu-ms", 1e6)()
		for b.Loop() {
			readText(b, r.fd, buf)
		}
	})
	walk := func(name string, w func(func(*uapi.VMA) bool) error) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			defer cpuTimer(b, "cpu-ms", 1e6)()
			n := 0
			for b.Loop() {
				if err := w(func(v *uapi.VMA) bool { n++; return true }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/float64(b.N), "vmas/op")
		})
	}
	walk("walk", r.Walk)
	walk("walk-query", r.WalkQuery)
	b.Run("procfs", func(b *testing.B) {
		p, err := procfs.NewProc(os.Getpid())
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		defer cpuTimer(b, "cpu-ms", 1e6)()
		n := 0
		for b.Loop() {
			maps, err := p.ProcMaps()
			if err != nil {
				b.Fatal(err)
			}
			n += len(maps)
		}
		b.ReportMetric(float64(n)/float64(b.N), "vmas/op")
	})
}

// BenchmarkLookup finds the VMA of one address in the middle of the 30,000:
// one PROCMAP_QUERY ioctl against scanning the text up to it (what a
// profiler without the ioctl does).
func BenchmarkLookup(b *testing.B) {
	r := benchSetup(b)
	addr := benchMidAddr()
	b.Run("ioctl", func(b *testing.B) {
		b.ReportAllocs()
		defer cpuTimer(b, "cpu-ns", 1)()
		for b.Loop() {
			if _, err := r.Lookup(addr); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("text-scan", func(b *testing.B) {
		old := open(b, os.Getpid())
		old.noQuery = true
		b.ReportAllocs()
		defer cpuTimer(b, "cpu-ns", 1)()
		for b.Loop() {
			if _, err := old.Lookup(addr); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkWalkOverRead alternates a bare read() of the whole text and a
// Walk, pass by pass, and reports the CPU time of each (user and kernel, of
// this thread: a busy machine's preemptions do not count) and their ratio
// (the target is at most 1.2).
func BenchmarkWalkOverRead(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := benchSetup(b)
	buf := make([]byte, textBufSize)
	b.ReportAllocs()
	alternate(b, "ms", 1e6,
		"read", func() error { readText(b, r.fd, buf); return nil },
		"walk", func() error { return r.Walk(func(*uapi.VMA) bool { return true }) })
}

// alternate runs first and then second in every iteration, and reports the
// CPU time of each per iteration (nanoseconds divided by scale) as
// NAME-cpu-UNIT, and second's over first's as SECOND/FIRST. The caller has
// locked its OS thread (nanotime).
func alternate(b *testing.B, unit string, scale float64, firstName string, first func() error, secondName string, second func() error) {
	var firstNs, secondNs int64
	for b.Loop() {
		t0 := nanotime()
		if err := first(); err != nil {
			b.Fatal(err)
		}
		t1 := nanotime()
		if err := second(); err != nil {
			b.Fatal(err)
		}
		t2 := nanotime()
		firstNs += t1 - t0
		secondNs += t2 - t1
	}
	b.ReportMetric(float64(firstNs)/float64(b.N)/scale, firstName+"-cpu-"+unit)
	b.ReportMetric(float64(secondNs)/float64(b.N)/scale, secondName+"-cpu-"+unit)
	b.ReportMetric(float64(secondNs)/float64(firstNs), secondName+"/"+firstName)
}

// cpuTimer reports, when stopped, the calling thread's CPU time per
// iteration as the metric unit: wall time on a busy machine counts other
// processes' turns, CPU time does not.
func cpuTimer(b *testing.B, unit string, scale float64) func() {
	runtime.LockOSThread()
	t0 := nanotime()
	return func() {
		b.ReportMetric(float64(nanotime()-t0)/float64(b.N)/scale, unit)
		runtime.UnlockOSThread()
	}
}

// nanotime is the CPU time of the calling thread (lock it first).
func nanotime() int64 {
	d, _ := host.ThreadCPUTime()
	return int64(d)
}

// BenchmarkLookupOverScan alternates a PROCMAP_QUERY lookup and a text scan
// of the same address (the middle of the 30,000 VMAs) and reports each
// one's CPU time and how many times faster the ioctl is.
func BenchmarkLookupOverScan(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := benchSetup(b)
	addr := benchMidAddr()
	alternate(b, "us", 1e3,
		"ioctl", func() error { _, err := r.Lookup(addr); return err },
		"scan", func() error { _, err := r.LookupText(addr); return err })
}
