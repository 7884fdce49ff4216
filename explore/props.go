package explore

import (
	"fmt"
	"slices"

	"mmlab/sched"
	"mmlab/uapi"
)

// Property is an invariant of the kernel the explorer checks, named in the
// kernel's terms.
type Property string

// The properties. Each is a plain predicate over model state: those over
// the tasks' states run at every scheduling decision (sched's Check), the
// others the moment the operation they are about completes (the run ends at
// the next decision).
const (
	// PropStall: nobody sleeps on an mmap_lock while holding dup_mmap_sem,
	// the first link of seed 000's stall chain (every later fork queues
	// behind it), caught as it forms.
	PropStall Property = "no sleep on mmap_lock under dup_mmap_sem"
	// PropAgree: after each completed uprobe_register or
	// uprobe_unregister, every mm of the scenario that maps the file agrees
	// with the registry: the breakpoint where a consumer wants it, the
	// file's bytes elsewhere.
	PropAgree Property = "every mm agrees with the registry"
	// PropInherit: a child forked while its parent had the breakpoint, and
	// no registration was under way, has it too if a consumer wants it.
	PropInherit Property = "no child misses its parent's breakpoint"
	// PropKilledClean: an unregister whose task was killed leaves no 0xCC
	// (nor a call to the trampoline, nor half a write): the text is the
	// file's.
	PropKilledClean Property = "a killed unregister leaves no 0xCC"
	// PropTeardown: no mm teardown (exit_mmap, dup_mm's mmput of a failed
	// child) runs under dup_mmap_sem.
	PropTeardown Property = "no teardown under dup_mmap_sem"
	// PropWarn: no WARN_ON_ONCE of uprobes fires.
	PropWarn Property = "no WARN_ON_ONCE"
	// PropMapsGap: a /proc/PID/maps read shows no gap where a VMA was
	// mapped both before and after a modification; PROCMAP_QUERY finds it.
	PropMapsGap Property = "a maps read shows no gap"
	// PropQueryGap: PROCMAP_QUERY of an address mapped throughout finds the
	// VMA covering it.
	PropQueryGap Property = "PROCMAP_QUERY finds a mapped address"
	// PropSync: no consumer's handler runs after uprobe_unregister_sync
	// returned.
	PropSync Property = "no consumer runs after uprobe_unregister_sync"
	// PropReturn: a task whose function had a uretprobe returns to its
	// caller and completes its calls.
	PropReturn Property = "a uretprobe returns to its caller"
	// PropDeadlock: the run never reaches a state where every live task is
	// blocked (the wait cycle is printed).
	PropDeadlock Property = "no deadlock"
	// PropProgress: the run ends within its step bound (no livelock).
	PropProgress Property = "the run ends"
)

// Violation is a property that failed: which, and what was seen.
type Violation struct {
	Property Property
	Detail   string
}

func (v *Violation) Error() string { return fmt.Sprintf("%s: %s", v.Property, v.Detail) }

// holds reports whether hs has a lock named name.
func holds(hs []sched.Held, name string) bool {
	return slices.ContainsFunc(hs, func(h sched.Held) bool { return h.Name == name })
}

// stallCheck is PropStall over the threads' states.
func (w *World) stallCheck() string {
	var bad string
	w.Sys.EachThread(func(t sched.ThreadState) {
		if bad == "" && t.Blocked && t.Obj == uapi.MmapLockName && holds(t.Holds, "dup_mmap_sem") {
			bad = fmt.Sprintf("T%d(%s) sleeps on mmap_lock holding %v", t.ID, t.Name, t.Holds)
		}
	})
	return bad
}

// teardownCheck is PropTeardown: a thread at exit_mmap or at dup_mm's
// mmput of a failed child holding dup_mmap_sem.
func (w *World) teardownCheck() string {
	var bad string
	w.Sys.EachThread(func(t sched.ThreadState) {
		if bad == "" && (t.Op == "exit_mmap" || t.Op == "dup_mm" && t.Obj == "mmput failed child") && holds(t.Holds, "dup_mmap_sem") {
			bad = fmt.Sprintf("T%d(%s) at %s %s holding %v", t.ID, t.Name, t.Op, t.Obj, t.Holds)
		}
	})
	return bad
}

// warnCheck is PropWarn.
func (w *World) warnCheck() string {
	if n := w.U.Warnings(); n > 0 {
		return fmt.Sprintf("%d WARN_ON_ONCE fired (a failed write of an optimized site)", n)
	}
	return ""
}

// stepChecks adds the per-decision checks of the scenario's properties.
func (w *World) stepChecks() {
	for _, c := range []check{{PropStall, w.stallCheck}, {PropTeardown, w.teardownCheck}, {PropWarn, w.warnCheck}} {
		if slices.Contains(w.props, c.prop) {
			w.checks = append(w.checks, c)
		}
	}
}
