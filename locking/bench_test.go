package locking_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"mmlab/locking"
)

func BenchmarkRWSemUncontendedRead(b *testing.B) {
	var s locking.RWSem
	for b.Loop() {
		s.DownRead(nil)
		s.UpRead()
	}
}

func BenchmarkRWSemUncontendedWrite(b *testing.B) {
	var s locking.RWSem
	for b.Loop() {
		s.DownWrite(nil)
		s.UpWrite()
	}
}

func BenchmarkRWSemParallelRead(b *testing.B) {
	var s locking.RWSem
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.DownRead(nil)
			s.UpRead()
		}
	})
}

// BenchmarkRWSemParallelMixed: one write in 16, so waits and wake-ups happen.
func BenchmarkRWSemParallelMixed(b *testing.B) {
	var s locking.RWSem
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if i++; i%16 == 0 {
				s.DownWrite(nil)
				s.UpWrite()
			} else {
				s.DownRead(nil)
				s.UpRead()
			}
		}
	})
}

// BenchmarkSyncRWMutexParallelRead is the baseline for the above.
func BenchmarkSyncRWMutexParallelRead(b *testing.B) {
	var m sync.RWMutex
	var n int
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.RLock()
			_ = n
			m.RUnlock()
		}
	})
}

func BenchmarkPercpuRWSemUncontendedRead(b *testing.B) {
	var s locking.PercpuRWSem
	tk := newTaskOn("t", 0)
	for b.Loop() {
		s.DownRead(tk)
		s.UpRead(tk)
	}
}

func BenchmarkPercpuRWSemUncontendedWrite(b *testing.B) {
	var s locking.PercpuRWSem
	for b.Loop() {
		s.DownWrite(nil)
		s.UpWrite()
	}
}

// BenchmarkPercpuRWSemParallelRead: each goroutine is a task on its own
// model CPU, so each uses its own counter.
func BenchmarkPercpuRWSemParallelRead(b *testing.B) {
	var s locking.PercpuRWSem
	var cpus atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		tk := newTaskOn("t", int(cpus.Add(1)))
		for pb.Next() {
			s.DownRead(tk)
			s.UpRead(tk)
		}
	})
}

// BenchmarkPercpuRWSemParallelReadNoCPU: tasks without a CPU use a random
// counter each time.
func BenchmarkPercpuRWSemParallelReadNoCPU(b *testing.B) {
	var s locking.PercpuRWSem
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.DownRead(nil)
			s.UpRead(nil)
		}
	})
}

func BenchmarkSeqCountRead(b *testing.B) {
	var c locking.SeqCount
	for b.Loop() {
		if c.ReadRetry(c.ReadBegin()) {
			b.Fatal("retry without a writer")
		}
	}
}
