package mm

import (
	"sync/atomic"
	"testing"
)

// TestNoTransientGap: a lock-free reader of the VMA tree (an RCU walker)
// never finds an address unmapped while it stays mapped throughout: splits,
// merges and MAP_FIXED replacement publish each change in one tree write,
// as the kernel's maple-tree stores do.
func TestNoTransientGap(t *testing.T) {
	m := New()
	mmapAnon(t, m, 0, 4, rw)
	done := make(chan struct{})
	var misses, reads atomic.Int64
	go func() {
		defer close(done)
		for range 500 {
			must(t, m.Mprotect(nil, arena+pg, pg, PROT_READ)) // split in three
			must(t, m.Mprotect(nil, arena+pg, pg, rw))        // merge back
			mmapAnon(t, m, 1, 1, rw)                          // MAP_FIXED over the middle
			mmapAnon(t, m, 2, 1, PROT_READ)                   // ...and over the next page
			must(t, m.Mprotect(nil, arena+2*pg, pg, rw))
		}
	}()
	for {
		select {
		case <-done:
			if misses.Load() != 0 {
				t.Fatalf("%d of %d lock-free lookups found a mapped page unmapped", misses.Load(), reads.Load())
			}
			return
		default:
		}
		for p := uint64(0); p < 4; p++ {
			reads.Add(1)
			if m.Tree().Load(arena+p*pg+8) == nil {
				misses.Add(1)
			}
		}
	}
}
