package sched

import (
	"errors"
	"slices"
	"testing"
)

// Config.Choose decides every decision that has a choice: a chooser that
// always runs the highest id runs w2 to its end first; the record shows its
// choices, and one that names a thread that cannot run fails the run with
// ErrSchedule.
func TestDetChoose(t *testing.T) {
	var seen []Choice
	log, rec, err := detRunLog(t, Config{Choose: func(c Choice) int {
		if len(c.Runnable) < 2 || !slices.IsSorted(c.Runnable) {
			t.Errorf("choice %+v: want at least two runnable ids, sorted", c)
		}
		seen = append(seen, Choice{Step: c.Step, From: c.From, Runnable: slices.Clone(c.Runnable)})
		return c.Runnable[len(c.Runnable)-1]
	}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"2.0", "2.1", "2.2", "2.3", "1.0"}; !slices.Equal(log[:5], want) {
		t.Errorf("log %v, want %v first", log, want)
	}
	if got := rec.Schedule(); len(got) != len(seen) || got[0] != 3 {
		t.Errorf("schedule %v for %d choices", got, len(seen))
	}
	_, _, err = detRunLog(t, Config{Choose: func(Choice) int { return 99 }})
	if !errors.Is(err, ErrSchedule) {
		t.Fatalf("a chooser naming no runnable thread: %v, want ErrSchedule", err)
	}
}

// EachThread, called from Check, shows each live thread's last point, a
// blocked one's wait and the locks each holds.
func TestDetEachThread(t *testing.T) {
	// The holder blocks first, then the waker runs.
	s := New(Config{CPUs: 1, Deterministic: true, Seed: 1, Schedule: []int{1, 2}})
	lock, ch := new(int), make(chan struct{})
	var states []ThreadState
	s.SpawnNamed("holder", 0, 0, func(*Thread) {
		Acquired(lock, "mylock", true)
		Wait(lock, "wakeup", ch, nil)
		Released(lock)
	})
	s.SpawnNamed("waker", 0, 0, func(*Thread) {
		At("probe", "here")
		s.EachThread(func(ts ThreadState) { states = append(states, ts) })
		Close(ch)
	})
	if _, err := s.Run(); err != nil {
		t.Fatal(err)
	}
	if len(states) != 2 {
		t.Fatalf("states %+v, want both threads", states)
	}
	h, w := states[0], states[1]
	if h.Name != "holder" || !h.Blocked || h.Op != "block" || h.Obj != "wakeup" || len(h.Holds) != 1 || h.Holds[0].Name != "mylock" {
		t.Errorf("holder %+v", h)
	}
	if w.Name != "waker" || w.Blocked || w.Op != "probe" || w.Obj != "here" || len(w.Holds) != 0 {
		t.Errorf("waker %+v", w)
	}
}
