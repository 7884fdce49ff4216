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
	t.Parallel()
	m := New(new(Namespace), testFeatures)
	mmapAnon(t, m, 0, 4, rw)
	done := make(chan struct{})
	var misses, reads atomic.Int64
	go func() {
		defer close(done)
		fixed := func(page uint64, prot int) error {
			_, err := m.Mmap(nil, arena+page*pg, pg, prot, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED, nil, 0)
			return err
		}
		for range 500 {
			for _, err := range []error{
				m.Mprotect(nil, arena+pg, pg, PROT_READ), // split in three
				m.Mprotect(nil, arena+pg, pg, rw),        // merge back
				fixed(1, rw),                             // MAP_FIXED over the middle
				fixed(2, PROT_READ),                      // ...and over the next page
				m.Mprotect(nil, arena+2*pg, pg, rw),
			} {
				if err != nil {
					t.Error(err) // not the test's goroutine: no t.Fatal
					return
				}
			}
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
