package fair

import "testing"

// The expected values below are worked by hand from the kernel's formulas;
// each test says how.

const (
	slice = 700_000   // BaseSlice(NormalizedBaseSlice, 1)
	tick  = 4_000_000 // TICK_NSEC at HZ=250
)

func TestBaseSlice(t *testing.T) {
	// 0.70 ms × (1 + ilog2(min(ncpus, 8))).
	for _, c := range []struct {
		ncpus int
		want  int64
	}{{1, 700_000}, {2, 1_400_000}, {3, 1_400_000}, {4, 2_100_000}, {8, 2_800_000}, {128, 2_800_000}} {
		if got := BaseSlice(NormalizedBaseSlice, c.ncpus); got != c.want {
			t.Errorf("BaseSlice(%d) = %d, want %d", c.ncpus, got, c.want)
		}
	}
	if got := BaseSlice(NormalizedBaseSlice66, 8); got != 3_000_000 {
		t.Errorf("v6.6's slice at 8 CPUs = %d, want 3 ms", got)
	}
}

func TestCalcDeltaFair(t *testing.T) {
	// nice 15: weight 36, inv_weight 119304647. fact = 1024 × 119304647 =
	// 122167958528, whose high word 28 has fls 5: shift 27, fact 3817748704;
	// 1e6 × 3817748704 >> 27 = 28444444 (1e6 × 1024/36 = 28444444.4).
	n15 := NewEntity(15, nil)
	if got := CalcDeltaFair(1_000_000, n15); got != 28_444_444 {
		t.Errorf("calc_delta_fair(1 ms, nice 15) = %d, want 28444444", got)
	}
	if got := CalcDeltaFair(1_000_000, NewEntity(0, nil)); got != 1_000_000 {
		t.Errorf("calc_delta_fair(1 ms, nice 0) = %d", got)
	}
	// nice -20: weight 88761, inv 48388; fact = 1024 × 48388 = 49549312 fits
	// 32 bits: 1e6 × 49549312 >> 32 = 11536 (1e6 × 1024/88761 = 11536.6).
	if got := CalcDeltaFair(1_000_000, NewEntity(-20, nil)); got != 11_536 {
		t.Errorf("calc_delta_fair(1 ms, nice -20) = %d, want 11536", got)
	}
}

// hogRQ returns a one-CPU run queue whose current entity is a nice-0 task
// that started at time 0 (vruntime 0, deadline half a slice: 350000).
func hogRQ() (*RQ, *Entity) {
	rq := NewRQ(V6_19(), NormalizedBaseSlice, slice, tick)
	hog := NewEntity(0, "hog")
	rq.Enqueue(hog, EnqueueInitial, 0)
	rq.SetNextTask(rq.PickTask(0, nil), 0)
	return rq, hog
}

func TestPlaceEntityInitial(t *testing.T) {
	rq, hog := hogRQ()
	if rq.Curr != hog || hog.Vruntime != 0 || hog.Deadline != slice/2 || hog.Vprot != slice/2 {
		t.Fatalf("hog: curr %v vruntime %d deadline %d vprot %d, want 0, 350000, 350000", rq.Curr == hog, hog.Vruntime, hog.Deadline, hog.Vprot)
	}
}

func TestPlaceEntityLag(t *testing.T) {
	// A nice-15 task wakes with vlag 1 ms beside the nice-0 hog at V = 0:
	// lag = 1e6 × (1024 + 36) / 1024 = 1035156 (truncated), vruntime =
	// -1035156; deadline = vruntime + calc_delta_fair(700000) = vruntime +
	// 19911111 = 18875955.
	rq, hog := hogRQ()
	w := NewEntity(15, "n15")
	w.Vlag = 1_000_000
	rq.Enqueue(w, 0, 0)
	if w.Vruntime != -1_035_156 || w.Deadline != 18_875_955 {
		t.Fatalf("wakee vruntime %d deadline %d, want -1035156, 18875955", w.Vruntime, w.Deadline)
	}
	// V = (0×1024 + -1035156×36) / 1060 rounded down = -35157: the hog
	// (vruntime 0) is no longer eligible, the wakee is.
	if v := rq.AvgVruntime(); v != -35_157 {
		t.Errorf("V = %d, want -35157", v)
	}
	if rq.Eligible(hog) || !rq.Eligible(w) {
		t.Errorf("eligible: hog %v wakee %v, want false, true", rq.Eligible(hog), rq.Eligible(w))
	}
	if !rq.WakeupPreempt(w, false, 0) {
		t.Error("a wakee with positive lag does not preempt the hog")
	}
}

func TestWakeupZeroLag(t *testing.T) {
	// Lag 0: the wakee lands at V = 0 = the hog's vruntime, the hog stays
	// eligible (equality counts) and protected (vprot 350000 > 0): no
	// preemption.
	rq, hog := hogRQ()
	w := NewEntity(15, "n15")
	rq.Enqueue(w, 0, 0)
	if w.Vruntime != 0 || !rq.Eligible(hog) || !hog.Protected() {
		t.Fatalf("wakee vruntime %d, hog eligible %v protected %v", w.Vruntime, rq.Eligible(hog), hog.Protected())
	}
	if rq.WakeupPreempt(w, false, 0) {
		t.Fatal("a zero-lag wakee preempts a protected hog")
	}
	// At the tick (4 ms) the hog's vruntime 4e6 passed its deadline:
	// update_deadline gives 4e6 + 700000 and asks for a reschedule; V =
	// (4e6×1024 + 0×36)/1060 = 3864150, so the pick is the wakee.
	if !rq.Tick(tick) {
		t.Fatal("the tick does not reschedule the hog past its deadline")
	}
	if hog.Deadline != tick+slice {
		t.Errorf("hog deadline %d, want %d", hog.Deadline, tick+slice)
	}
	if v := rq.AvgVruntime(); v != 3_864_150 {
		t.Errorf("V = %d, want 3864150", v)
	}
	if got := rq.PickTask(tick, nil); got != w {
		t.Errorf("pick after the tick: %v, want the wakee", got.Owner)
	}
}

func TestPickOrder(t *testing.T) {
	// Three nice-0 tasks queued behind an idle curr slot: deadlines by
	// placement at V with different vlag; the earliest eligible deadline
	// wins, an earlier but ineligible one is skipped.
	rq := NewRQ(V6_19(), NormalizedBaseSlice, slice, tick)
	a, b, c := NewEntity(0, "a"), NewEntity(0, "b"), NewEntity(0, "c")
	rq.Enqueue(a, 0, 0) // alone: vruntime 0, deadline 700000
	b.Vlag = -100_000   // behind: vruntime 0 + 100000×2048/1024 = 200000, deadline 900000
	rq.Enqueue(b, 0, 0)
	c.Vlag = 50_000 // V = (0 + 200000)/2 = 100000; lag 50000×3072/2048 = 75000: vruntime 25000, deadline 725000
	rq.Enqueue(c, 0, 0)
	if a.Vruntime != 0 || b.Vruntime != 200_000 || c.Vruntime != 25_000 || c.Deadline != 725_000 {
		t.Fatalf("vruntimes %d %d %d, c deadline %d", a.Vruntime, b.Vruntime, c.Vruntime, c.Deadline)
	}
	// V = (0 + 200000 + 25000)/3 = 75000: a and c eligible, b not.
	if rq.Eligible(b) || !rq.Eligible(a) || !rq.Eligible(c) {
		t.Fatal("eligibility")
	}
	if got := rq.PickEEVDF(true); got != a {
		t.Fatalf("pick %v, want a (deadline 700000)", got.Owner)
	}
	// Make a ineligible: it ran 300000 ns (vruntime 300000 > V).
	rq.SetNextTask(a, 0)
	rq.UpdateCurr(300_000)
	// V = (300000 + 200000 + 25000)/3 = 175000: a and b ineligible; c wins
	// though a's deadline (700000) is earlier.
	if got := rq.PickEEVDF(false); got != c {
		t.Fatalf("pick %v, want c", got.Owner)
	}
}

func TestEntityLagClamp(t *testing.T) {
	// update_entity_lag clamps to calc_delta_fair(max(2×700000, 4e6)) =
	// 4e6 × 1024/36 = 113777777 for nice 15.
	rq, _ := hogRQ()
	w := NewEntity(15, "n15")
	rq.Enqueue(w, 0, 0)
	w.Vruntime = -1_000_000_000 // far behind (tests only: move it by hand)
	rq.dequeueTimeline(w)
	rq.enqueueTimeline(w)
	rq.F.DelayDequeue = false
	rq.Dequeue(w, DequeueSleep, 0)
	if w.Vlag != 113_777_777 {
		t.Errorf("vlag %d, want 113777777", w.Vlag)
	}
}

func TestDelayDequeue(t *testing.T) {
	// A nice-15 task that ran ahead of V sleeps: not eligible, it stays
	// queued, delayed; woken, DELAY_ZERO leaves its negative lag as it is.
	// Picked while delayed, it is dequeued with its lag clipped to 0 only
	// if positive.
	rq, hog := hogRQ()
	w := NewEntity(15, "n15")
	rq.Enqueue(w, 0, 0)
	rq.SetNextTask(w, 0) // the hog back to the timeline, w current
	rq.UpdateCurr(100_000)
	// w's vruntime: 100000 × 1024/36 = 2844444 > V.
	if w.Vruntime != 2_844_444 || rq.Eligible(w) {
		t.Fatalf("w vruntime %d eligible %v", w.Vruntime, rq.Eligible(w))
	}
	if rq.Dequeue(w, DequeueSleep, 100_000) || !w.Delayed || !w.OnRQ || rq.NrQueued != 2 {
		t.Fatalf("dequeue of an ineligible sleeper: delayed %v on_rq %v nr %d", w.Delayed, w.OnRQ, rq.NrQueued)
	}
	rq.Requeue(w)
	if w.Delayed || w.Vruntime != 2_844_444 {
		t.Errorf("requeue: delayed %v vruntime %d", w.Delayed, w.Vruntime)
	}
	rq.Dequeue(w, DequeueSleep, 100_000)
	// The pick skips w (current, delayed, not eligible): the hog runs and w
	// goes back to the timeline, still delayed.
	var gone []*Entity
	if got := rq.PickTask(100_000, func(se *Entity) { gone = append(gone, se) }); got != hog || len(gone) != 0 {
		t.Fatalf("pick %v, dequeued %d", got.Owner, len(gone))
	}
	rq.SetNextTask(hog, 100_000)
	// The hog runs 3 ms: vruntime 3e6, V = (3e6×1024 + 2844444×36)/1060 =
	// 2994717: w is eligible and the pick, so its dequeue finishes with
	// vlag 2994717 - 2844444 = 150273 > 0, which DELAY_ZERO clips to 0.
	got := rq.PickTask(3_100_000, func(se *Entity) { gone = append(gone, se) })
	if got != hog || len(gone) != 1 || gone[0] != w || w.OnRQ || w.Delayed || w.Vlag != 0 {
		t.Errorf("pick %v, dequeued %d, w on_rq %v delayed %v vlag %d", got.Owner, len(gone), w.OnRQ, w.Delayed, w.Vlag)
	}
}

func TestPreemptShort(t *testing.T) {
	// A zero-lag wakee with a shorter slice than the protected hog's: both
	// at V = 0, eligible. Deadlines 700000 (wakee) and 350000 (hog): the
	// pick without protection is the hog, no preemption.
	for _, short := range []bool{true, false} {
		rq, hog := hogRQ()
		rq.F.PreemptShort = short
		hog.Slice = 3 * slice // as a custom slice would
		w := NewEntity(0, "short")
		rq.Enqueue(w, 0, 0)
		if rq.WakeupPreempt(w, false, 0) {
			t.Fatal("preempted by a later deadline")
		}
		// With the hog's deadline past the wakee's, PREEMPT_SHORT picks
		// without the hog's protection and cancels it; without it the
		// protection holds.
		hog.Deadline = 1_000_000
		if got := rq.WakeupPreempt(w, false, 0); got != short || hog.Protected() == short {
			t.Errorf("PREEMPT_SHORT %v: preempt %v, protected %v", short, got, hog.Protected())
		}
	}
}

func TestRepickKeepsProtection(t *testing.T) {
	// The hog alone past its protection (vprot 350000, vruntime 4e6 after
	// the tick) picked again stays unprotected, as put_prev_set_next_task()
	// does nothing when next == prev.
	rq, hog := hogRQ()
	w := NewEntity(0, "w")
	w.Vlag = -10_000_000 // far behind: never eligible here
	rq.Enqueue(w, 0, 0)
	rq.Tick(tick)
	if got := rq.PickTask(tick, nil); got != hog {
		t.Fatalf("pick %v", got.Owner)
	}
	rq.SetNextTask(hog, tick)
	if hog.Protected() || hog.Vprot != slice/2 {
		t.Errorf("vprot %d, protected %v: want 350000, false", hog.Vprot, hog.Protected())
	}
}
