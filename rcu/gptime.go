package rcu

import (
	"time"

	"mmlab/sched"
)

// Clock is the time source grace periods wait on. The default is sched's
// clock: the wall clock, or a deterministic run's virtual time.
type Clock interface {
	Now() time.Time
	Sleep(d time.Duration)
}

type schedClock struct{}

func (schedClock) Now() time.Time        { return sched.Now() }
func (schedClock) Sleep(d time.Duration) { sched.Sleep(d) }

// Timing is the kernel setting a domain's grace periods are timed at: the
// sleeps and jiffy-aligned timeouts the kernel's grace-period machinery
// takes on top of waiting for readers. The zero Timing is untimed: a grace
// period then costs only its mechanism (the scan, the IPIs, the readers),
// as is fit for tests.
type Timing struct {
	// HZ is CONFIG_HZ; 0 leaves grace periods untimed.
	HZ int
	// Clock is the time source; nil is sched's clock.
	Clock Clock
}

// ThisKernel is the live kernel's setting (6.18, CONFIG_HZ=250,
// CONFIG_TASKS_TRACE_RCU_READ_MB off), the one the model's grace periods
// are compared with.
var ThisKernel = Timing{HZ: 250}

func (t Timing) timed() bool { return t.HZ > 0 }

func (t Timing) clock() Clock {
	if t.Clock == nil {
		return schedClock{}
	}
	return t.Clock
}

func (t Timing) jiffy() time.Duration { return time.Second / time.Duration(t.HZ) }

// jiffies returns the jiffy count of the clock's time now.
func (t Timing) jiffies() int64 { return t.clock().Now().UnixNano() / int64(t.jiffy()) }

// sleepJiffies mirrors schedule_timeout(n): sleep until the jiffy counter
// has advanced by n, i.e. to the n-th tick from now (between n-1 and n
// jiffies of time).
func (t Timing) sleepJiffies(n int) {
	if !t.timed() || n <= 0 {
		return
	}
	c := t.clock()
	end := time.Unix(0, (t.jiffies()+int64(n))*int64(t.jiffy()))
	if d := end.Sub(c.Now()); d > 0 {
		c.Sleep(d)
	}
}

// sleepUntilJiffy sleeps until the jiffy counter reaches j.
func (t Timing) sleepUntilJiffy(j int64) {
	if n := j - t.jiffies(); n > 0 {
		t.sleepJiffies(int(n))
	}
}

// normalGP is the time a normal (not expedited) grace period of tree RCU
// takes beyond its mechanism, from kernel/rcu/tree.c at this setting: the
// grace-period kthread starts the grace period at once (rcu_start_this_gp
// wakes it); a CPU idle in dyntick mode is reported by the first
// force-quiescent-state scan, jiffies_till_first_fqs = 1 +
// nr_cpu_ids/RCU_JIFFIES_FQS_DIV = 1 jiffy later at HZ=250
// (RCU_JIFFIES_TILL_FORCE_QS); a CPU that runs a task notices the new grace
// period at its next tick (rcu_sched_clock_irq, then note_gp_changes in
// rcu_core) and reports its quiescent state at the tick after that. With
// few CPUs (rcu_normal_wake_from_gp, num_possible_cpus() <=
// WAKE_FROM_GP_CPU_THRESHOLD) synchronize_rcu()'s caller is woken from the
// grace period's cleanup, with no callback to wait for. running says
// whether any CPU was running a task.
func (t Timing) normalGP(running bool) {
	if running {
		t.sleepJiffies(2)
	} else {
		t.sleepJiffies(1)
	}
}

// NewClassicAt returns a classic RCU domain for the CPUs of sys whose
// grace periods are normal ones timed at t (normalGP).
func NewClassicAt(sys *sched.System, t Timing) *Classic {
	c := NewClassic(sys)
	c.timing = t
	return c
}

// NewTasksTraceAt returns a Tasks Trace domain for the threads of sys whose
// grace periods are timed at t (TasksTrace.waitTimed).
func NewTasksTraceAt(sys *sched.System, t Timing) *TasksTrace {
	tt := NewTasksTrace(sys)
	tt.timing = t
	if t.timed() {
		tt.cbs.sync = tt.lazySync
	}
	return tt
}

// lazySync is the grace period a batch of Tasks Trace callbacks waits
// for, from kernel/rcu/tasks.h: call_rcu_tasks_generic() does not wake the
// grace-period kthread for a callback but arms the lazy timer,
// lazy_jiffies = DIV_ROUND_UP(HZ, 4) later; a synchronize_rcu_tasks_trace()
// meanwhile (wakeme_after_rcu: urgent) has the kthread start a grace
// period, which the callbacks then share. The model looks for such a grace
// period once a jiffy.
func (tt *TasksTrace) lazySync() {
	t := tt.timing
	snap := tt.nStarts.Load() // a grace period under way may have begun before the callbacks
	for range (t.HZ + 3) / 4 {
		if tt.nGPs.Load() > snap {
			return
		}
		t.sleepJiffies(1)
	}
	if tt.nGPs.Load() <= snap {
		tt.Synchronize()
	}
}

// NewSRCUAt returns an SRCU domain for the CPUs of sys whose grace periods
// are timed at t (SRCU.waitDrainedTimed).
func NewSRCUAt(sys *sched.System, t Timing) *SRCU {
	s := NewSRCU(sys)
	s.timing = t
	return s
}

// waitTimed is the holdout wait of a Tasks Trace grace period at tt's
// timing, from kernel/rcu/tasks.h at CONFIG_TASKS_TRACE_RCU_READ_MB=n:
//
//   - the grace-period kthread sleeps gp_sleep = max(1, HZ/200) jiffies
//     after each grace period (rcu_tasks_kthread's "paranoid sleep"), so a
//     grace period starts no earlier than the tick after the previous one
//     ended (lastEnd);
//   - rcu_tasks_trace_postscan() waits for a normal grace period
//     (synchronize_rcu());
//   - rcu_tasks_trace_pregp_step() put every online CPU's current task on
//     the holdout list, idle tasks included (the kthread's own CPU aside:
//     the model's kthread has a CPU of its own, a model choice), so the
//     holdout loop of rcu_tasks_wait_gp() runs: it sleeps fract jiffies,
//     from init_fract = max(1, HZ/200) growing by one per pass, then scans.
//     A task that is running cannot be inspected without
//     TASKS_TRACE_RCU_READ_MB (trc_inspect_reader() returns -EINVAL), so
//     the first scan IPIs it, rcu_task_ipi_delay being 0, asynchronously
//     (smp_call_function_single(..., 0)); the answer is taken at the second
//     scan. A reader found inside a read section leaves the list at the
//     first scan after it reported.
//
// The readers' side is the mechanism's: done reports whether every holdout
// has reported.
func (tt *TasksTrace) waitTimed(running bool, done func() bool) {
	t := tt.timing
	t.normalGP(running)
	fract := max(1, t.HZ/200)
	for pass := 1; ; pass++ {
		t.sleepJiffies(fract)
		if fract < t.HZ {
			fract++
		}
		if pass >= 2 && done() {
			return
		}
	}
}

// startTimed waits for the Tasks Trace kthread's gp_sleep after the
// previous grace period (see waitTimed). Called with gpMu held.
func (tt *TasksTrace) startTimed() {
	if tt.lastEnd != 0 {
		tt.timing.sleepUntilJiffy(tt.lastEnd + int64(max(1, tt.timing.HZ/200)))
	}
}

// SRCU timing constants (kernel/rcu/srcutree.c).
const (
	srcuExpHoldoff      = 25 * time.Microsecond // DEFAULT_SRCU_EXP_HOLDOFF
	srcuRetryCheckDelay = 5 * time.Microsecond  // SRCU_DEFAULT_RETRY_CHECK_DELAY
	srcuInterval        = 1                     // SRCU_INTERVAL, jiffies
	srcuMaxInterval     = 10                    // SRCU_MAX_INTERVAL, jiffies
)

// srcuMaxNodelay is srcu_max_nodelay and srcu_max_nodelay_phase at hz:
// 2*USEC_PER_SEC/HZ/SRCU_DEFAULT_RETRY_CHECK_DELAY clamped to [3, 1000], at
// least 100 (SRCU_DEFAULT_MAX_NODELAY).
func srcuMaxNodelay(hz int) int {
	n := min(max(2*1000000/hz/5, 3), 1000)
	return max(n, 100)
}

// srcuGP is one timed SRCU grace period's state: expedited or not, and
// when it started.
type srcuGP struct {
	expedited  bool
	startJ     int64
	nodelay    int   // srcu_n_exp_nodelay
	reschedJ   int64 // reschedule_jiffies
	reschedCnt int   // reschedule_count
}

// startTimed begins a timed grace period, from kernel/rcu/srcutree.c:
// synchronize_srcu() expedites when srcu_should_expedite() finds the domain
// idle (no grace period in progress, busy says whether there was one, and
// none ended within exp_holdoff); otherwise srcu_funnel_gp_start() queues
// process_srcu() with a delay of !!srcu_get_delay() = 1 jiffy. The funnel
// itself (srcu_node tree) is trivial at this CPU count: one request starts
// the grace period, the model's gpMu queues the rest, each of which then
// needs a full grace period of its own, as a request that comes during a
// grace period needs the next one (srcu_gp_seq_needed). Called with gpMu
// held.
func (s *SRCU) startTimed(busy bool) *srcuGP {
	t := s.timing
	c := t.clock()
	g := &srcuGP{expedited: !busy && (s.lastEnd.IsZero() || c.Now().Sub(s.lastEnd) >= srcuExpHoldoff)}
	if !g.expedited {
		t.sleepJiffies(1)
	}
	g.startJ = t.jiffies()
	return g
}

// delay mirrors srcu_get_delay(): 0 while expedited (1 after
// srcu_max_nodelay_phase no-delay rounds of this phase), else
// SRCU_INTERVAL, plus the jiffies the grace period has lasted beyond the
// first, at most SRCU_MAX_INTERVAL.
func (g *srcuGP) delay(t Timing) int {
	j := srcuInterval
	if g.expedited {
		j = 0
	}
	if age := t.jiffies() - 1 - g.startJ; age > 0 {
		j += int(age)
	}
	if j == 0 {
		g.nodelay++
		if g.nodelay > srcuMaxNodelay(t.HZ) {
			j = 1
		}
	}
	return min(j, srcuMaxInterval)
}

// waitDrainedTimed waits until slot idx has no readers, as
// srcu_advance_state() does in a phase: try_check_zero() checks trycount
// times (once more if expedited) with udelay(srcu_retry_check_delay)
// between; on failure process_srcu() is requeued after srcu_get_delay()
// jiffies, or at once, but after srcu_max_nodelay immediate requeues within
// one jiffy, after one jiffy.
func (s *SRCU) waitDrainedTimed(g *srcuGP, idx uint32, trycount int, hooked *bool) {
	t := s.timing
	c := t.clock()
	for {
		extra := 0
		if g.delay(t) == 0 {
			extra = 1
		}
		for n := trycount + extra; ; {
			if s.readersActiveIdxCheck(idx) {
				g.nodelay = 0
				return
			}
			s.nWaits.Add(1)
			if n--; n <= 0 {
				break
			}
			c.Sleep(srcuRetryCheckDelay)
		}
		if !*hooked && s.waitHook != nil {
			*hooked = true
			s.waitHook()
		}
		d := g.delay(t)
		if d == 0 {
			if j := t.jiffies(); g.reschedJ == j {
				if g.reschedCnt++; g.reschedCnt > srcuMaxNodelay(t.HZ) {
					d = 1
				}
			} else {
				g.reschedJ, g.reschedCnt = j, 1
			}
		}
		t.sleepJiffies(d)
	}
}
