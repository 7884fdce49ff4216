package procfs

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkLiveMapsRead reads this process's /proc/self/maps, with 30,000
// one-page VMAs added (alternating rw and r), in 4 KiB read()s: the
// kernel's text generation for the same number of VMAs as
// BenchmarkModelMapsRead.
func BenchmarkLiveMapsRead(b *testing.B) {
	ps := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, benchVMAs*ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Munmap(mem)
	for i := 1; i < benchVMAs; i += 2 {
		if err := unix.Mprotect(mem[i*ps:(i+1)*ps], unix.PROT_READ); err != nil {
			b.Fatal(err)
		}
	}
	fd, err := unix.Open("/proc/self/maps", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 4096)
	var total int
	b.ReportAllocs()
	for b.Loop() {
		if _, err := unix.Seek(fd, 0, 0); err != nil {
			b.Fatal(err)
		}
		total = 0
		for {
			n, err := unix.Read(fd, buf)
			if err != nil {
				b.Fatal(err)
			}
			if n == 0 {
				break
			}
			total += n
		}
	}
	b.SetBytes(int64(total))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchVMAs, "ns/vma")
}
