// Package fair is Linux's fair scheduling class (EEVDF) for one CPU's run
// queue, ported function by function from v6.19's kernel/sched/fair.c, with
// the integer arithmetic of the kernel: vruntime in nanoseconds of a nice-0
// task, weights from sched_prio_to_weight (scale_load_down'ed, as a 64-bit
// kernel keeps them), calc_delta_fair through the inverse weights of
// sched_prio_to_wmult, and V as the kernel's avg_vruntime / avg_load sums
// relative to zero_vruntime. Each function names the kernel function it
// mirrors. It is pure: the caller passes the run queue's clock
// (rq_clock_task) and acts on what the functions return (a reschedule is a
// returned bool, not resched_curr_lazy()).
//
// Model choices the kernel does not make:
//   - no group scheduling (one cfs_rq per CPU, every entity a task), no
//     bandwidth control, no PELT load tracking, no buddies (NEXT_BUDDY is
//     off in v6.19, so cfs_rq->next is never set), no custom slices;
//   - the timeline is a slice sorted by deadline in place of the augmented
//     rbtree: __pick_eevdf's heap search becomes a scan in deadline order,
//     which finds the same entity (the earliest deadline among the eligible;
//     equal deadlines in insertion order, as rb_add_augmented_cached puts an
//     equal key to the right);
//   - vruntime, deadline and the sums are int64 where the kernel has u64
//     with signed differences (no run comes near 2^63 ns).
package fair

import (
	"math"
	"math/bits"
)

// Features is the SCHED_FEAT set this port reads (kernel/sched/features.h).
type Features struct {
	PlaceLag, PlaceDeadlineInitial, PlaceRelDeadline bool
	RunToParity, PreemptShort                        bool
	DelayDequeue, DelayZero                          bool
	WakeupPreemption                                 bool
}

// V6_19 is v6.19's default feature set (features.h: all of these true).
func V6_19() Features {
	return Features{PlaceLag: true, PlaceDeadlineInitial: true, PlaceRelDeadline: true,
		RunToParity: true, PreemptShort: true, DelayDequeue: true, DelayZero: true,
		WakeupPreemption: true}
}

// NormalizedBaseSlice is normalized_sysctl_sched_base_slice of v6.19:
// 0.70 ms, since commit 2ae891b82695 ("sched: Reduce the default slice to
// avoid tasks getting an extra tick", the v6.15 cycle by its date; also
// backported to 6.6.y). v6.6 to v6.14 have 0.75 ms (NormalizedBaseSlice66).
const (
	NormalizedBaseSlice   = 700_000
	NormalizedBaseSlice66 = 750_000
)

// BaseSlice is sysctl_sched_base_slice for ncpus online CPUs:
// normalized × (1 + ilog2(min(ncpus, 8))), as update_sysctl() with
// get_update_sysctl_factor() under SCHED_TUNABLESCALING_LOG.
func BaseSlice(normalized int64, ncpus int) int64 {
	return normalized * int64(bits.Len(uint(min(max(ncpus, 1), 8))))
}

// Nice0Load is scale_load_down(NICE_0_LOAD).
const Nice0Load = 1024

// Weights is sched_prio_to_weight (kernel/sched/core.c), nice -20 to 19.
var Weights = [40]int64{
	88761, 71755, 56483, 46273, 36291,
	29154, 23254, 18705, 14949, 11916,
	9548, 7620, 6100, 4904, 3906,
	3121, 2501, 1991, 1586, 1277,
	1024, 820, 655, 526, 423,
	335, 272, 215, 172, 137,
	110, 87, 70, 56, 45,
	36, 29, 23, 18, 15,
}

// InvWeights is sched_prio_to_wmult (kernel/sched/core.c): 2^32/weight.
var InvWeights = [40]uint32{
	48388, 59856, 76040, 92818, 118348,
	147320, 184698, 229616, 287308, 360437,
	449829, 563644, 704093, 875809, 1099582,
	1376151, 1717300, 2157191, 2708050, 3363326,
	4194304, 5237765, 6557202, 8165337, 10153587,
	12820798, 15790321, 19976592, 24970740, 31350126,
	39045157, 49367440, 61356676, 76695844, 95443717,
	119304647, 148102320, 186737708, 238609294, 286331153,
}

// Entity is a task's sched_entity.
type Entity struct {
	Weight    int64  // load.weight, scale_load_down'ed
	InvWeight uint32 // load.inv_weight

	Vruntime, Deadline, Vlag, Vprot, Slice int64
	ExecStart, SumExec                     int64 // rq_clock_task at the last update; total run time
	OnRQ, Delayed, RelDeadline             bool

	// Owner is the caller's task, for finding it from a pick.
	Owner any
}

// NewEntity returns an entity of nice level nice, as set_load_weight().
func NewEntity(nice int, owner any) *Entity {
	se := &Entity{Owner: owner}
	se.SetNice(nice)
	return se
}

// SetNice sets the weight of a nice level of an entity not on a run queue
// (set_load_weight(); Reweight for one that is).
func (se *Entity) SetNice(nice int) {
	i := min(max(nice, -20), 19) + 20
	se.Weight, se.InvWeight = Weights[i], InvWeights[i]
}

// calcDelta is __calc_delta(delta, weight, lw): delta*weight/lw.weight
// through lw's inverse weight, with the kernel's shifts.
func calcDelta(delta int64, weight int64, invWeight uint32) int64 {
	fact := uint64(weight)
	shift := 32
	if hi := uint32(fact >> 32); hi != 0 {
		fs := bits.Len32(hi)
		shift -= fs
		fact >>= fs
	}
	fact = uint64(uint32(fact)) * uint64(invWeight)
	if hi := uint32(fact >> 32); hi != 0 {
		fs := bits.Len32(hi)
		shift -= fs
		fact >>= fs
	}
	// mul_u64_u32_shr
	h, l := bits.Mul64(uint64(delta), fact)
	return int64(h<<(64-shift) | l>>shift)
}

// CalcDeltaFair is calc_delta_fair(delta, se): delta scaled by
// NICE_0_LOAD/weight. delta must not be negative.
func CalcDeltaFair(delta int64, se *Entity) int64 {
	if se.Weight != Nice0Load {
		return calcDelta(delta, Nice0Load, se.InvWeight)
	}
	return delta
}

// Enqueue and dequeue flags (kernel/sched/sched.h's ENQUEUE_*, DEQUEUE_*).
const (
	EnqueueInitial  = 1 << iota // a new task (ENQUEUE_INITIAL)
	EnqueueMigrated             // it comes from another CPU (ENQUEUE_MIGRATED)
	DequeueSleep                // the task blocks (DEQUEUE_SLEEP)
	DequeueDelayed              // finish a delayed dequeue (DEQUEUE_DELAYED)
	DequeueSpecial              // never delay (DEQUEUE_SPECIAL)
)

// RQ is one CPU's cfs_rq.
type RQ struct {
	F         Features
	BaseSlice int64 // sysctl_sched_base_slice
	TickNsec  int64 // TICK_NSEC
	// NormalizedSlice is normalized_sysctl_sched_base_slice, the quantum
	// set_protect_slice gives without RUN_TO_PARITY.
	NormalizedSlice int64

	Curr      *Entity
	timeline  []*Entity // queued entities but Curr, by deadline
	AvgVrunt  int64     // avg_vruntime: \Sum (v_i - v0) * w_i
	AvgLoad   int64     // avg_load: \Sum w_i
	ZeroVrunt int64     // zero_vruntime (v0)
	NrQueued  int       // nr_queued: entities on_rq, Curr and delayed ones included
	Load      int64     // load.weight
}

// NewRQ returns a cfs_rq of features f and base slice slice, for a tick of
// tickNsec.
func NewRQ(f Features, normalized, slice, tickNsec int64) *RQ {
	return &RQ{F: f, NormalizedSlice: normalized, BaseSlice: slice, TickNsec: tickNsec}
}

// Queued returns the entities of the timeline, by deadline (not Curr).
func (rq *RQ) Queued() []*Entity { return rq.timeline }

func (rq *RQ) entityKey(se *Entity) int64 { return se.Vruntime - rq.ZeroVrunt }

// avgVruntimeAdd is avg_vruntime_add().
func (rq *RQ) avgVruntimeAdd(se *Entity) {
	rq.AvgVrunt += rq.entityKey(se) * se.Weight
	rq.AvgLoad += se.Weight
}

// avgVruntimeSub is avg_vruntime_sub().
func (rq *RQ) avgVruntimeSub(se *Entity) {
	rq.AvgVrunt -= rq.entityKey(se) * se.Weight
	rq.AvgLoad -= se.Weight
}

// sums returns avg_vruntime and avg_load with Curr counted, as
// avg_vruntime() and vruntime_eligible() take them.
func (rq *RQ) sums() (avg, load int64) {
	avg, load = rq.AvgVrunt, rq.AvgLoad
	if c := rq.Curr; c != nil && c.OnRQ {
		avg += rq.entityKey(c) * c.Weight
		load += c.Weight
	}
	return avg, load
}

// AvgVruntime is avg_vruntime(): V, rounded down (a left bias, so that an
// entity at V is eligible).
func (rq *RQ) AvgVruntime() int64 {
	avg, load := rq.sums()
	if load != 0 {
		if avg < 0 {
			avg -= load - 1
		}
		avg /= load
	}
	return rq.ZeroVrunt + avg
}

// updateEntityLag is update_entity_lag(): vlag = V - v, clamped to the
// virtual time of max(2 slices, a tick).
func (rq *RQ) updateEntityLag(se *Entity) {
	vlag := rq.AvgVruntime() - se.Vruntime
	limit := CalcDeltaFair(max(2*se.Slice, rq.TickNsec), se)
	se.Vlag = min(max(vlag, -limit), limit)
}

// VruntimeEligible is vruntime_eligible(): V >= v, without the division.
func (rq *RQ) VruntimeEligible(v int64) bool {
	avg, load := rq.sums()
	return avg >= (v-rq.ZeroVrunt)*load
}

// Eligible is entity_eligible().
func (rq *RQ) Eligible(se *Entity) bool { return rq.VruntimeEligible(se.Vruntime) }

// updateZeroVruntime is update_zero_vruntime().
func (rq *RQ) updateZeroVruntime() {
	v := rq.AvgVruntime()
	rq.AvgVrunt -= rq.AvgLoad * (v - rq.ZeroVrunt) // avg_vruntime_update()
	rq.ZeroVrunt = v
}

// minSlice is cfs_rq_min_slice().
func (rq *RQ) minSlice() int64 {
	m := int64(math.MaxInt64)
	if c := rq.Curr; c != nil && c.OnRQ {
		m = c.Slice
	}
	for _, se := range rq.timeline {
		m = min(m, se.Slice)
	}
	return m
}

// enqueueTimeline is __enqueue_entity().
func (rq *RQ) enqueueTimeline(se *Entity) {
	rq.avgVruntimeAdd(se)
	rq.updateZeroVruntime()
	i := len(rq.timeline)
	for i > 0 && rq.timeline[i-1].Deadline > se.Deadline {
		i--
	}
	rq.timeline = append(rq.timeline, nil)
	copy(rq.timeline[i+1:], rq.timeline[i:])
	rq.timeline[i] = se
}

// dequeueTimeline is __dequeue_entity().
func (rq *RQ) dequeueTimeline(se *Entity) {
	for i, x := range rq.timeline {
		if x == se {
			rq.timeline = append(rq.timeline[:i], rq.timeline[i+1:]...)
			break
		}
	}
	rq.avgVruntimeSub(se)
	rq.updateZeroVruntime()
}

// setProtectSlice is set_protect_slice().
func (rq *RQ) setProtectSlice(se *Entity) {
	slice, vprot := rq.NormalizedSlice, se.Deadline
	if rq.F.RunToParity {
		slice = rq.minSlice()
	}
	slice = min(slice, se.Slice)
	if slice != se.Slice {
		vprot = min(vprot, se.Vruntime+CalcDeltaFair(slice, se))
	}
	se.Vprot = vprot
}

// updateProtectSlice is update_protect_slice().
func (rq *RQ) updateProtectSlice(se *Entity) {
	se.Vprot = min(se.Vprot, se.Vruntime+CalcDeltaFair(rq.minSlice(), se))
}

// Protected is protect_slice().
func (se *Entity) Protected() bool { return se.Vprot-se.Vruntime > 0 }

// cancelProtectSlice is cancel_protect_slice().
func (se *Entity) cancelProtectSlice() {
	if se.Protected() {
		se.Vprot = se.Vruntime
	}
}

// PickEEVDF is __pick_eevdf(cfs_rq, protect): the eligible entity with the
// earliest deadline, Curr if it is eligible and protect holds its slice.
func (rq *RQ) PickEEVDF(protect bool) *Entity {
	curr := rq.Curr
	var first *Entity
	if len(rq.timeline) > 0 {
		first = rq.timeline[0]
	}
	if rq.NrQueued == 1 {
		if curr != nil && curr.OnRQ {
			return curr
		}
		return first
	}
	if curr != nil && (!curr.OnRQ || !rq.Eligible(curr)) {
		curr = nil
	}
	if curr != nil && protect && curr.Protected() {
		return curr
	}
	var best *Entity
	for _, se := range rq.timeline { // the heap search, in deadline order
		if rq.Eligible(se) {
			best = se
			break
		}
	}
	if best == nil || (curr != nil && curr.Deadline < best.Deadline) { // entity_before()
		best = curr
	}
	return best
}

// updateDeadline is update_deadline(): a new request once vruntime reaches
// the deadline; true if the task consumed its request.
func (rq *RQ) updateDeadline(se *Entity) bool {
	if se.Vruntime-se.Deadline < 0 {
		return false
	}
	se.Slice = rq.BaseSlice
	se.Deadline = se.Vruntime + CalcDeltaFair(se.Slice, se)
	return true
}

// UpdateCurr is update_curr() at rq_clock_task now: it charges Curr the
// time since its ExecStart and reports whether it should be rescheduled
// (the kernel's resched_curr_lazy()).
func (rq *RQ) UpdateCurr(now int64) (resched bool) {
	curr := rq.Curr
	if curr == nil {
		return false
	}
	delta := now - curr.ExecStart // update_se()
	if delta <= 0 {
		return false
	}
	curr.ExecStart = now
	curr.SumExec += delta
	curr.Vruntime += CalcDeltaFair(delta, curr)
	r := rq.updateDeadline(curr)
	if rq.NrQueued == 1 {
		return false
	}
	return r || !curr.Protected()
}

// PlaceEntity is place_entity(): at V, minus its saved lag inflated by the
// weight it adds (PLACE_LAG), with a deadline a virtual slice on (half a
// slice for a new task, PLACE_DEADLINE_INITIAL), or its relative deadline.
func (rq *RQ) PlaceEntity(se *Entity, flags int) {
	v := rq.AvgVruntime()
	se.Slice = rq.BaseSlice
	vslice := CalcDeltaFair(se.Slice, se)
	var lag int64
	if rq.F.PlaceLag && rq.NrQueued > 0 && se.Vlag != 0 {
		lag = se.Vlag
		load := rq.AvgLoad
		if c := rq.Curr; c != nil && c.OnRQ {
			load += c.Weight
		}
		lag *= load + se.Weight
		if load == 0 {
			load = 1
		}
		lag /= load // div_s64 truncates toward zero
	}
	se.Vruntime = v - lag
	if se.RelDeadline {
		se.Deadline += se.Vruntime
		se.RelDeadline = false
		return
	}
	if rq.F.PlaceDeadlineInitial && flags&EnqueueInitial != 0 {
		vslice /= 2
	}
	se.Deadline = se.Vruntime + vslice
}

// Enqueue is enqueue_entity() at rq_clock_task now.
func (rq *RQ) Enqueue(se *Entity, flags int, now int64) {
	curr := rq.Curr == se
	if curr {
		rq.PlaceEntity(se, flags)
	}
	rq.UpdateCurr(now)
	if !curr {
		rq.PlaceEntity(se, flags)
	}
	rq.Load += se.Weight // account_entity_enqueue()
	rq.NrQueued++
	if flags&EnqueueMigrated != 0 {
		se.ExecStart = 0
	}
	if !curr {
		rq.enqueueTimeline(se)
	}
	se.OnRQ = true
}

// Dequeue is dequeue_entity() at rq_clock_task now. It returns false when
// the entity stays queued, delayed (DELAY_DEQUEUE: a sleeper that is not
// eligible keeps competing until it is picked or woken).
func (rq *RQ) Dequeue(se *Entity, flags int, now int64) bool {
	sleep := flags&DequeueSleep != 0
	rq.UpdateCurr(now)
	if flags&DequeueDelayed == 0 {
		delay := sleep && flags&DequeueSpecial == 0
		if rq.F.DelayDequeue && delay && !rq.Eligible(se) {
			se.Delayed = true // set_delayed()
			return false
		}
	}
	rq.updateEntityLag(se)
	if rq.F.PlaceRelDeadline && !sleep {
		se.Deadline -= se.Vruntime
		se.RelDeadline = true
	}
	if se != rq.Curr {
		rq.dequeueTimeline(se)
	}
	se.OnRQ = false
	rq.Load -= se.Weight // account_entity_dequeue()
	rq.NrQueued--
	if flags&DequeueDelayed != 0 { // finish_delayed_dequeue_entity()
		se.Delayed = false
		if rq.F.DelayZero && se.Vlag > 0 {
			se.Vlag = 0
		}
	}
	return true
}

// Requeue is requeue_delayed_entity(): a delayed entity is woken where it
// is queued; DELAY_ZERO places one with positive lag afresh at lag 0.
func (rq *RQ) Requeue(se *Entity) {
	if rq.F.DelayZero {
		rq.updateEntityLag(se)
		if se.Vlag > 0 {
			rq.NrQueued--
			if se != rq.Curr {
				rq.dequeueTimeline(se)
			}
			se.Vlag = 0
			rq.PlaceEntity(se, 0)
			if se != rq.Curr {
				rq.enqueueTimeline(se)
			}
			rq.NrQueued++
		}
	}
	se.Delayed = false
}

// setNext is set_next_entity(): se becomes Curr, leaving the timeline, with
// its slice protected.
func (rq *RQ) setNext(se *Entity) {
	if se.OnRQ {
		rq.dequeueTimeline(se)
		rq.setProtectSlice(se)
	}
	rq.Curr = se
}

// putPrev is put_prev_entity(): Curr goes back to the timeline if it is
// still queued.
func (rq *RQ) putPrev(now int64) {
	prev := rq.Curr
	if prev.OnRQ {
		rq.UpdateCurr(now)
		rq.enqueueTimeline(prev)
	}
	rq.Curr = nil
}

// PickTask is pick_task_fair() at rq_clock_task now: pick_next_entity()
// until the pick is not a delayed entity, whose dequeue it finishes (each
// such entity is passed to dequeued). nil if nothing is queued.
func (rq *RQ) PickTask(now int64, dequeued func(*Entity)) *Entity {
	for rq.NrQueued > 0 {
		if c := rq.Curr; c != nil && c.OnRQ {
			rq.UpdateCurr(now)
		}
		se := rq.PickEEVDF(true)
		if !se.Delayed {
			return se
		}
		rq.Dequeue(se, DequeueSleep|DequeueDelayed, now)
		if dequeued != nil {
			dequeued(se)
		}
	}
	return nil
}

// SetNextTask is put_prev_set_next_task() for the fair class: Curr (if
// any) is put back and next becomes Curr, its clock starting at now
// (update_stats_curr_start()). A pick of Curr itself changes nothing: its
// slice protection is not renewed.
func (rq *RQ) SetNextTask(next *Entity, now int64) {
	if next != nil && next == rq.Curr {
		return
	}
	if rq.Curr != nil {
		rq.putPrev(now)
	}
	if next != nil {
		rq.setNext(next)
		next.ExecStart = now
	}
}

// Tick is entity_tick() from task_tick_fair(): update_curr(); true if
// Curr should be rescheduled.
func (rq *RQ) Tick(now int64) bool { return rq.UpdateCurr(now) }

// WakeupPreempt is check_preempt_wakeup_fair(): whether the woken pse,
// just enqueued, preempts Curr. The caller has checked that Curr is not
// already to be rescheduled and that both are SCHED_NORMAL tasks (no
// SCHED_IDLE entities here); fork is a WF_FORK wake-up.
func (rq *RQ) WakeupPreempt(pse *Entity, fork bool, now int64) bool {
	se := rq.Curr
	if se == nil || se == pse || !rq.F.WakeupPreemption {
		return false
	}
	rq.UpdateCurr(now)
	short := false
	if rq.F.PreemptShort && pse.Slice < se.Slice {
		short = true
	} else if fork || pse.Delayed {
		return false
	}
	if rq.PickEEVDF(!short) == pse {
		if short {
			se.cancelProtectSlice()
		}
		return true
	}
	if rq.F.RunToParity {
		rq.updateProtectSlice(se)
	}
	return false
}

// Yield is yield_task_fair(): Curr forfeits the rest of its request if it
// is eligible.
func (rq *RQ) Yield(now int64) {
	se := rq.Curr
	if se == nil || rq.NrQueued == 1 {
		return
	}
	rq.UpdateCurr(now)
	if rq.Eligible(se) {
		se.Vruntime = se.Deadline
		se.Deadline += CalcDeltaFair(se.Slice, se)
	}
}

// Reweight is reweight_entity() with reweight_task_fair()'s inverse
// weight: se takes the weight of nice level nice.
func (rq *RQ) Reweight(se *Entity, nice int, now int64) {
	i := min(max(nice, -20), 19) + 20
	weight := Weights[i]
	curr := rq.Curr == se
	if se.OnRQ {
		rq.UpdateCurr(now)
		rq.updateEntityLag(se)
		se.Deadline -= se.Vruntime
		se.RelDeadline = true
		rq.NrQueued--
		if !curr {
			rq.dequeueTimeline(se)
		}
		rq.Load -= se.Weight
	}
	se.Vlag = se.Vlag * se.Weight / weight
	if se.RelDeadline {
		se.Deadline = se.Deadline * se.Weight / weight
	}
	se.Weight, se.InvWeight = weight, InvWeights[i]
	if se.OnRQ {
		rq.PlaceEntity(se, 0)
		rq.Load += se.Weight
		if !curr {
			rq.enqueueTimeline(se)
		}
		rq.NrQueued++
	}
}
