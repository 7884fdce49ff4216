package procfs

import (
	"testing"

	"mmlab/machine"
	"mmlab/mm"
)

// benchVMAs is the size of the benchmark address space.
const benchVMAs = 30000

// benchMM returns an address space of n one-page VMAs, alternating rw and r.
func benchMM(b *testing.B, n int) *mm.MM {
	b.Helper()
	m := mm.New(new(mm.Namespace), machine.MustNamed("x86-64").Features)
	const base = 0x100000000
	if _, err := m.Mmap(nil, base, uint64(n)*4096, mm.PROT_READ|mm.PROT_WRITE, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED, nil, 0); err != nil {
		b.Fatal(err)
	}
	for i := 1; i < n; i += 2 {
		if err := m.Mprotect(nil, base+uint64(i)*4096, 4096, mm.PROT_READ); err != nil {
			b.Fatal(err)
		}
	}
	if got := m.MapCount(); got != n {
		b.Fatalf("%d VMAs, want %d", got, n)
	}
	return m
}

// BenchmarkModelMapsRead reads the whole maps text of 30,000 VMAs in 4 KiB
// chunks with each walk. Compare with BenchmarkLiveMapsRead (Linux).
func BenchmarkModelMapsRead(b *testing.B) {
	m := benchMM(b, benchVMAs)
	for _, v := range []Variant{Before, After} {
		b.Run(v.String(), func(b *testing.B) {
			f := mustOpenMaps(m, Options{Variant: v})
			buf := make([]byte, 0, 2<<20)
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if buf, err = f.ReadAll(buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(buf)))
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchVMAs, "ns/vma")
		})
	}
}
