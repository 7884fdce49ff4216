package uprobes

import (
	"fmt"
	"slices"

	"mmlab/design"
	"mmlab/kernel"
	"mmlab/rcu"
)

// HitPath is the kernel whose hit path a model runs: seed 004's own
// (v6.12, the series "uprobes: RCU-protected hot path optimizations") or
// today's. The zero HitPath is unset: New refuses it (design.ErrUnset).
type HitPath int

const (
	// HitPathV612 is v6.12 as patches 1-7 of the series left it, with
	// patch 8 (seed 004) choosing the flavour: find_active_uprobe_rcu takes
	// mmap_read_lock for the VMA lookup on every hit; find_uprobe_rcu is
	// lockless (uprobes_seqcount and rb_find_rcu); no uprobe reference on
	// the entry path but pre_ssout's; consumers walked under the flavour's
	// read section, register_rwsem taken only to remove the breakpoint;
	// each return instance allocated (kmalloc) and holding a reference on
	// its uprobe (try_get_uprobe in prepare_uretprobe, put_uprobe in
	// free_ret_instance); handle_uretprobe_chain under the flavour's read
	// lock; no uretprobes_srcu, so no leases, and no ri_pool.
	HitPathV612 HitPath = iota + 1
	// HitPathToday is v6.14+: the VMA found without the mmap lock
	// (find_active_uprobe_speculative), a return instance taken from the
	// task's ri_pool and holding a lease on its uprobe (a read section of
	// uretprobes_srcu, v6.13's hprobe), uprobe_unregister_sync waiting for
	// uretprobes_srcu too.
	HitPathToday
)

// HitPaths are both, the seed's first, named "v6.12" and "v6.14+".
var HitPaths = design.NewSet[HitPath]("hit path", "v6.12", "v6.14+")

// String returns "v6.12" or "v6.14+".
func (h HitPath) String() string { return HitPaths.String(h) }

// MarshalText returns the hit path's name.
func (h HitPath) MarshalText() ([]byte, error) { return HitPaths.Marshal(h) }

// UnmarshalText sets h to the hit path named text.
func (h *HitPath) UnmarshalText(text []byte) error { return HitPaths.Unmarshal(h, text) }

// allocRetInstance is the return instance of a uretprobe hit on up. v6.12:
// prepare_uretprobe()'s try_get_uprobe() and kmalloc(), nil if the uprobe
// is dying; v6.13+: alloc_return_instance(), from the task's ri_pool if it
// has one (the lease is taken once the instance is filled in).
func (u *Uprobes) allocRetInstance(up *Uprobe, ut *utask) *retInstance {
	if u.hitPath == HitPathV612 {
		if !up.tryGet() {
			return nil
		}
		return new(retInstance)
	}
	if n := len(ut.pool); n > 0 {
		ri := ut.pool[n-1]
		ut.pool[n-1] = nil
		ut.pool = ut.pool[:n-1]
		return ri
	}
	return new(retInstance)
}

// freeRetInstance frees ri. v6.12: free_ret_instance(), put_uprobe() and
// kfree() (Go's collector); v6.13+: free_ret_instance(), the lease ended
// and ri back in the pool (ri_pool_push()).
func (u *Uprobes) freeRetInstance(r *kernel.Runner, ut *utask, ri *retInstance) {
	if u.hitPath == HitPathV612 {
		if ri.up != nil {
			ri.up.put()
		}
		return
	}
	if ri.up != nil {
		u.uretSRCU.ReadUnlock(r.Task.Thread, ri.srcuIdx)
	}
	*ri = retInstance{}
	ut.pool = append(ut.pool, ri)
}

// Variant is one model kernel the experiments compare, by name.
type Variant struct {
	Name   string
	Config Config
}

// Variants are the kernels the experiments of seed 004 compare: the seed's
// era under both flavours (named after the flavour, as the seed's tables
// are; no nop5 optimization, which came in v6.18) and today's hit path
// (named after its kernel), all with grace periods timed as on the live
// kernel.
var Variants = []Variant{
	{"srcu", Config{Flavor: SRCU, Design: kernel.DesignBefore, HitPath: HitPathV612, Optimize: OptimizeOff, GP: rcu.ThisKernel}},
	{"tasks-trace", Config{Flavor: TasksTrace, Design: kernel.DesignBefore, HitPath: HitPathV612, Optimize: OptimizeOff, GP: rcu.ThisKernel}},
	{"v6.14+", Config{Flavor: TasksTrace, Design: kernel.DesignBefore, Optimize: OptimizeCall, HitPath: HitPathToday, GP: rcu.ThisKernel}},
}

// VariantNames are the names of Variants, in order.
func VariantNames() []string {
	var ns []string
	for _, v := range Variants {
		ns = append(ns, v.Name)
	}
	return ns
}

// ParseVariants reads variant names of Variants.
func ParseVariants(names []string) ([]Variant, error) {
	var vs []Variant
	for _, s := range names {
		i := slices.IndexFunc(Variants, func(v Variant) bool { return v.Name == s })
		if i < 0 {
			return nil, fmt.Errorf("uprobes: unknown variant %q (want one of %v)", s, VariantNames())
		}
		vs = append(vs, Variants[i])
	}
	return vs, nil
}
