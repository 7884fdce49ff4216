package pgtable

import (
	"runtime"
	"testing"
)

// BenchmarkPopulate1GiB faults in a 1 GiB anonymous region (MAP_POPULATE of a
// private writable mapping) into a fresh table per iteration and reports the
// time and the bytes allocated per page (the aim: at most 50 ns and 64 B a
// page). cpu-ns/page is the process's CPU time (GC included) per page.
func BenchmarkPopulate1GiB(b *testing.B) {
	const pages = gib / PageSize
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tb := NewTable()
		tb.Populate(1<<40, 1<<40+gib, nil, true)
		if tb.Resident() != pages {
			b.Fatal(tb.Resident())
		}
	}
	b.StopTimer()
	cpu := cpuTime() - cpu0
	runtime.ReadMemStats(&ms1)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*pages), "ns/page")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(b.N*pages), "B/page")
	b.ReportMetric(float64(cpu)/float64(b.N*pages), "cpu-ns/page")
}

// BenchmarkCopyCOW10000 copies 10,000 resident anonymous pages (spread over
// 20 PTE tables, as a fork of a process with that RSS) into a fresh child
// table per iteration.
func BenchmarkCopyCOW10000(b *testing.B) {
	parent := NewTable()
	for i := uint64(0); i < 20; i++ {
		s := 1<<30 + i*4*mib
		parent.Populate(s, s+500*PageSize, nil, true)
	}
	if parent.Resident() != 10000 {
		b.Fatal(parent.Resident())
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		child := NewTable()
		parent.CopyCOW(child, 0, AddrLimit)
		b.StopTimer()
		child.Zap(0, AddrLimit, nil)
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*10000), "ns/page")
}

func BenchmarkLookup(b *testing.B) {
	tb := NewTable()
	tb.Populate(1<<30, 1<<30+64*mib, nil, true)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok := tb.Lookup(1<<30 + uint64(i*7919)%(64*mib)); !ok {
			b.Fatal("miss")
		}
	}
}

// BenchmarkZap1GiB unmaps a populated 1 GiB region (munmap: zap every PTE,
// drop every mapcount, free the tables); populating it again is not timed.
func BenchmarkZap1GiB(b *testing.B) {
	const pages = gib / PageSize
	tb := NewTable()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		tb.Populate(1<<40, 1<<40+gib, nil, true)
		b.StartTimer()
		tb.Zap(1<<40, 1<<40+gib, nil)
		if tb.Resident() != 0 {
			b.Fatal(tb.Resident())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*pages), "ns/page")
}
