package mm

import (
	"testing"
	"time"

	"mmlab/mm/pgtable"
)

const arena = 0x100000000000

// BenchmarkPopulate1GiB measures MAP_POPULATE of a 1 GiB private anonymous
// region: every PTE and page installed under the mmap read lock (the target
// to keep is at most 50 ns and 64 bytes per page).
func BenchmarkPopulate1GiB(b *testing.B) {
	const size = 1 << 30
	const pages = size / pgtable.PageSize
	b.ReportAllocs()
	var allocated uint64
	for b.Loop() {
		m := New(new(Namespace), testFeatures)
		var before, after memStats
		before.read()
		if _, err := m.Mmap(nil, arena, size, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED|MAP_POPULATE, nil, 0); err != nil {
			b.Fatal(err)
		}
		after.read()
		allocated += after.totalAlloc - before.totalAlloc
		if m.PT.Resident() != pages {
			b.Fatalf("resident %d, want %d", m.PT.Resident(), pages)
		}
		b.StopTimer()
		m.Exit()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/pages, "ns/page")
	b.ReportMetric(float64(allocated)/float64(b.N)/pages, "B/page")
}

// forkShape builds an address space of nVMAs private anonymous VMAs (kept
// apart by alternating protections) with resident pages written in each.
func forkShape(tb testing.TB, nVMAs, resident int) *MM {
	m := New(new(Namespace), testFeatures)
	per := resident / nVMAs
	for i := range nVMAs {
		addr := uint64(arena + i*(per+1)*pgtable.PageSize)
		prot := PROT_READ | PROT_WRITE
		if _, err := m.Mmap(nil, addr, uint64(per+1)*pgtable.PageSize, prot, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED, nil, 0); err != nil {
			tb.Fatal(err)
		}
		for p := range per {
			if err := m.StoreByte(nil, addr+uint64(p)*pgtable.PageSize, 1); err != nil {
				tb.Fatal(err)
			}
		}
		// A PROT_NONE guard page keeps neighbours from merging.
		if err := m.Mprotect(nil, addr+uint64(per)*pgtable.PageSize, pgtable.PageSize, PROT_NONE); err != nil {
			tb.Fatal(err)
		}
	}
	return m
}

// BenchmarkFork measures Fork (dup_mmap) of an address space of 1,000 VMAs
// with 10,000 resident anonymous pages, and the child's exit.
func BenchmarkFork(b *testing.B) {
	m := forkShape(b, 500, 10000) // 500 RW VMAs + 500 guard VMAs = 1,000
	if n := len(m.VMAs()); n != 1000 {
		b.Fatalf("%d VMAs, want 1000", n)
	}
	b.ReportAllocs()
	for b.Loop() {
		c, err := m.Fork(nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		c.Exit()
		b.StartTimer()
	}
}

// BenchmarkLoadByte measures a user load of a resident page: address to VMA
// to PTE to page, under the mmap read lock.
func BenchmarkLoadByte(b *testing.B) {
	m := forkShape(b, 10, 100)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.LoadByte(nil, arena+5); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFaultLookupNoAlloc pins that a load or store of a resident page, and a
// fault on one, do not allocate.
func TestFaultLookupNoAlloc(t *testing.T) {
	m := forkShape(t, 10, 100)
	if n := testing.AllocsPerRun(100, func() {
		if _, err := m.LoadByte(nil, arena+5); err != nil {
			t.Fatal(err)
		}
		if err := m.StoreByte(nil, arena+6, 2); err != nil {
			t.Fatal(err)
		}
		if err := m.Fault(nil, arena+7, X86_PF_WRITE); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per resident access, want 0", n)
	}
}

// BenchmarkMremapOntoMapped measures mremap(MREMAP_MAYMOVE|MREMAP_FIXED) of
// a written page onto a mapped one (the mremap gap's far layout:
// docs/mremap-gap.md) in each design of GapFixes, side by side: ns/mremap is
// the Mremap call alone (the mmap that maps the spare again is not timed).
func BenchmarkMremapOntoMapped(b *testing.B) {
	const pg = pgtable.PageSize
	left, dst, right, spare := uint64(arena), uint64(arena+pg), uint64(arena+2*pg), uint64(arena+0x10000*pg)
	for _, g := range GapFixes.Values() {
		b.Run(g.String(), func(b *testing.B) {
			m, err := NewWith(new(Namespace), testFeatures, Config{GapFix: g})
			if err != nil {
				b.Fatal(err)
			}
			anon := MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED
			for _, a := range []struct {
				addr uint64
				prot int
			}{{left, PROT_READ | PROT_WRITE}, {dst, PROT_READ | PROT_EXEC}, {right, PROT_READ}, {spare, PROT_READ | PROT_WRITE}} {
				if _, err := m.Mmap(nil, a.addr, pg, a.prot, anon, nil, 0); err != nil {
					b.Fatal(err)
				}
			}
			var moving time.Duration
			for b.Loop() {
				if err := m.StoreByte(nil, spare, 1); err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				if _, err := m.Mremap(nil, spare, pg, pg, MREMAP_MAYMOVE|MREMAP_FIXED, dst); err != nil {
					b.Fatal(err)
				}
				moving += time.Since(t0)
				if _, err := m.Mmap(nil, spare, pg, PROT_READ|PROT_WRITE, anon, nil, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(moving.Nanoseconds())/float64(b.N), "ns/mremap")
		})
	}
}
