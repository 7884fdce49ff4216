package uprobe

import "time"

// FirstHitResult is what FirstHit measured.
type FirstHitResult struct {
	First time.Duration // the first call after the attach
	Hit   time.Duration // a later call: the mean of the later calls
	// Optimized says whether the first hit left the site a call (x86-64
	// optimized uprobes, v6.18+).
	Optimized bool
}
