package lockrank

import (
	"errors"
	"testing"
)

// Check allows Order's closure and a higher subclass of the held class, and
// refuses the rest with an *OrderError.
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		held, c  Class
		hsub, sb uint8
		ok       bool
	}{
		{held: DupMmapSem, c: MmapLock, ok: true},
		{held: RegisterRwsem, c: PTL, ok: true}, // by transitivity
		{held: MmapLock, c: DupMmapSem},
		{held: IMmapRwsem, c: MmapLock},
		{held: MmapLock, c: MmapLock},
		{held: MmapLock, c: MmapLock, sb: SingleDepthNesting, ok: true},
		{held: MmapLock, c: MmapLock, hsub: SingleDepthNesting},
		{held: None, c: MmapLock, ok: true},
		{held: MmapLock, c: None, ok: true},
	} {
		err := Check(c.held, c.hsub, c.c, c.sb)
		var oe *OrderError
		if c.ok != (err == nil) || err != nil && (!errors.Is(err, ErrOrder) || !errors.As(err, &oe) || oe.Held != c.held || oe.Class != c.c) {
			t.Errorf("Check(%v/%d, %v/%d) = %v, want ok %v", c.held, c.hsub, c.c, c.sb, err, c.ok)
		}
	}
}

// Every class has a name that parses back, and Order has no cycle (init
// would have panicked) and no pair twice.
func TestClasses(t *testing.T) {
	for c := None + 1; c < numClasses; c++ {
		if got, ok := ParseClass(c.String()); !ok || got != c {
			t.Errorf("ParseClass(%q) = %v, %v", c.String(), got, ok)
		}
	}
	if _, ok := ParseClass("none"); ok {
		t.Error(`ParseClass("none") succeeded`)
	}
	seen := map[[2]Class]bool{}
	for _, e := range Edges() {
		if seen[e] {
			t.Errorf("Order has %v < %v twice", e[0], e[1])
		}
		seen[e] = true
	}
}

// An Exemption allows only its own pairs.
func TestExemption(t *testing.T) {
	if !Seed000After.Allows(MmapLock, DupMmapSem) || Seed000After.Allows(DupMmapSem, MmapLock) || Seed000After.Allows(IMmapRwsem, MmapLock) {
		t.Errorf("Seed000After allows the wrong pairs: %v", Seed000After.Pairs)
	}
}
