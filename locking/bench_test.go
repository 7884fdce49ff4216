package locking_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"mmlab/locking"
)

// BenchmarkUncontended times one acquire and release, each case on a lock
// of its own.
func BenchmarkUncontended(b *testing.B) {
	var rwRead, rwWrite locking.RWSem
	var pcRead, pcWrite locking.PercpuRWSem
	tk := newTaskOn("t", 0)
	for _, bc := range []struct {
		name string
		op   func()
	}{
		{"RWSem/read", func() { rwRead.DownRead(nil); rwRead.UpRead() }},
		{"RWSem/write", func() { rwWrite.DownWrite(nil); rwWrite.UpWrite() }},
		{"PercpuRWSem/read", func() { pcRead.DownRead(tk); pcRead.UpRead(tk) }},
		{"PercpuRWSem/write", func() { pcWrite.DownWrite(nil); pcWrite.UpWrite() }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				bc.op()
			}
		})
	}
}

// BenchmarkParallel times one acquire and release from every goroutine at
// once, each case on a lock of its own; newOp gives each goroutine its op.
func BenchmarkParallel(b *testing.B) {
	var rwRead, rwMixed locking.RWSem
	var pcRead, pcNoCPU locking.PercpuRWSem
	var m sync.RWMutex
	var n int
	var cpus atomic.Int64
	for _, bc := range []struct {
		name  string
		newOp func() func()
	}{
		{"RWSem/read", func() func() {
			return func() { rwRead.DownRead(nil); rwRead.UpRead() }
		}},
		// One write in 16, so waits and wake-ups happen.
		{"RWSem/mixed", func() func() {
			i := 0
			return func() {
				if i++; i%16 == 0 {
					rwMixed.DownWrite(nil)
					rwMixed.UpWrite()
				} else {
					rwMixed.DownRead(nil)
					rwMixed.UpRead()
				}
			}
		}},
		// The baseline for RWSem/read.
		{"SyncRWMutex/read", func() func() {
			return func() { m.RLock(); _ = n; m.RUnlock() }
		}},
		// Each goroutine is a task on its own model CPU, so each uses its
		// own counter.
		{"PercpuRWSem/read", func() func() {
			tk := newTaskOn("t", int(cpus.Add(1)))
			return func() { pcRead.DownRead(tk); pcRead.UpRead(tk) }
		}},
		// Tasks without a CPU use a random counter each time.
		{"PercpuRWSem/read-nocpu", func() func() {
			return func() { pcNoCPU.DownRead(nil); pcNoCPU.UpRead(nil) }
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				op := bc.newOp()
				for pb.Next() {
					op()
				}
			})
		})
	}
}

func BenchmarkSeqCountRead(b *testing.B) {
	var c locking.SeqCount
	for b.Loop() {
		if c.ReadRetry(c.ReadBegin()) {
			b.Fatal("retry without a writer")
		}
	}
}
