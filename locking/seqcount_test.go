package locking_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"mmlab/locking"
)

func TestSeqCount(t *testing.T) {
	var c locking.SeqCount
	s := c.ReadBegin()
	if s != 0 || c.ReadRetry(s) {
		t.Fatalf("fresh counter: begin %d, retry %v", s, c.ReadRetry(s))
	}
	c.WriteBegin()
	if c.Raw()&1 != 1 {
		t.Fatalf("raw %d inside a write section, want odd", c.Raw())
	}
	if !c.ReadRetry(s) {
		t.Fatal("no retry after a writer began")
	}
	// A reader that begins now waits for the writer to finish.
	got := make(chan uint64)
	go func() { got <- c.ReadBegin() }()
	c.WriteEnd()
	if s2 := <-got; s2 != 2 || c.ReadRetry(s2) {
		t.Fatalf("begin after one write section: %d, want 2", s2)
	}
}

func TestSeqCountMisusePanics(t *testing.T) {
	for name, f := range map[string]func(c *locking.SeqCount){
		"WriteEnd":      func(c *locking.SeqCount) { c.WriteEnd() },
		"WriteBegin x2": func(c *locking.SeqCount) { c.WriteBegin(); c.WriteBegin() },
		"WriteEnd x2":   func(c *locking.SeqCount) { c.WriteBegin(); c.WriteEnd(); c.WriteEnd() },
	} {
		mustPanic(t, name, func() { f(new(locking.SeqCount)) })
	}
}

// Readers never accept a torn pair: a writer keeps a == b, a reader that
// sees a != b must be told to retry.
func TestSeqCountReaders(t *testing.T) {
	var c locking.SeqCount
	var a, b atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var torn, reads atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				s := c.ReadBegin()
				x, y := a.Load(), b.Load()
				if !c.ReadRetry(s) {
					reads.Add(1)
					if x != y {
						torn.Add(1)
					}
				}
			}
		}()
	}
	for i := range int64(20000) {
		c.WriteBegin()
		a.Store(i)
		b.Store(i)
		c.WriteEnd()
	}
	close(stop)
	wg.Wait()
	if torn.Load() != 0 {
		t.Fatalf("%d of %d accepted reads saw a torn pair", torn.Load(), reads.Load())
	}
}
