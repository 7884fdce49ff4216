package sched

import (
	"errors"
	"testing"

	"mmlab/locking/lockrank"
)

// runInversion takes an i_mmap_rwsem-class lock, then an mmap_lock-class one
// (the inverse of lockrank.Order), in a deterministic run; exempt, if not
// nil, is the System's exemption.
func runInversion(exempt *lockrank.Exemption) error {
	s := New(Config{CPUs: 1, Deterministic: true})
	if exempt != nil {
		s.ExemptLockOrder(*exempt)
	}
	inner, outer := new(int), new(int)
	s.SpawnNamed("t", 0, 0, func(*Thread) {
		AcquiredClass(inner, "i_mmap_rwsem", false, lockrank.IMmapRwsem, 0, false)
		AcquiredClass(outer, "mmap_lock", true, lockrank.MmapLock, 0, true) // a trylock: not checked
		Released(outer)
		AcquiredClass(outer, "mmap_lock", true, lockrank.MmapLock, 0, false)
		Released(outer)
		Released(inner)
	})
	_, err := s.Run()
	return err
}

// Built with -tags invariants, an acquisition against lockrank.Order ends
// the run with a *LockOrderError (a trylock does not), unless the System
// exempts the pair; without the tag nothing is checked.
func TestLockOrderChecked(t *testing.T) {
	err := runInversion(nil)
	var le *LockOrderError
	if invariants {
		if !errors.As(err, &le) || !errors.Is(err, lockrank.ErrOrder) || le.Lock.Class != lockrank.MmapLock ||
			len(le.Holds) != 1 || le.Holds[0].Class != lockrank.IMmapRwsem {
			t.Errorf("inverted order: %v, want a *LockOrderError for mmap_lock holding i_mmap_rwsem", err)
		}
	} else if err != nil {
		t.Errorf("without -tags invariants: %v", err)
	}
	ex := lockrank.Exemption{Name: "test", Pairs: [][2]lockrank.Class{{lockrank.IMmapRwsem, lockrank.MmapLock}}}
	if err := runInversion(&ex); err != nil {
		t.Errorf("exempted inversion: %v", err)
	}
}
