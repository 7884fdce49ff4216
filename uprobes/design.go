package uprobes

import (
	"slices"
	"time"

	"mmlab/kernel"
	"mmlab/locking"
	"mmlab/mm"
	"mmlab/sched"
)

// NewTaskMM returns a new single-threaded process named comm with an empty
// address space on u's machine, probed by u: u is its mm's hooks, and its
// forks (and theirs) take dup_mmap_sem in u's design.
func (u *Uprobes) NewTaskMM(comm string) (*kernel.Task, error) {
	return u.machine.NewTaskMMWith(comm, kernel.Config{Design: u.design, DupMmapSem: &u.DupMmapSem, Hooks: u})
}

// Passes returns how many passes over the file's mappings the after
// design's register_for_each_vma made in total (one per call when nothing
// is busy).
func (u *Uprobes) Passes() int64 { return u.passes.Load() }

// removalWaiter is the waiter a removal runs as in the after design (patch
// 8): the task, but with no fatal signal, so that neither the killable
// waits nor the breakpoint writes (GUP refuses a killed caller) stop it
// half-way, as if the rest were handed to a kernel worker. Blocking and
// blocked-time accounting still go to the task.
type removalWaiter struct{ w locking.Waiter }

func (r removalWaiter) Fatal() <-chan struct{} { return nil }

func (r removalWaiter) CPU() int {
	if r.w == nil {
		return -1
	}
	return r.w.CPU()
}

func (r removalWaiter) Block(wait func()) {
	if b, ok := r.w.(locking.Blocker); ok {
		b.Block(wait)
		return
	}
	wait()
}

func (r removalWaiter) RecordBlocked(lock string, d time.Duration) {
	if br, ok := r.w.(locking.BlockRecorder); ok {
		br.RecordBlocked(lock, d)
	}
}

// registerForEachVMAAfter mirrors register_for_each_vma() with seed 000's
// patches 1, 2, 5 and 8. Patch 2 ("uprobes: Don't run exit_mmap() under
// dup_mmap_sem"): the user references taken by build_map_info are dropped
// after dup_mmap_sem is released, so that the last one, for an mm whose
// task exited during the pass, runs exit_mmap() outside it (model choice:
// the cover letter names the fix, not its code; a list of mms to put after
// the unlock is the plainest way to make it hold). With dup_mmap_sem held for write each mm's mmap lock
// is only trylocked (mmap_write_trylock, which opens the mm's lock sequence
// as mmap_write_lock does); a busy mm is kept, with its user reference, for
// later. Once dup_mmap_sem is dropped the busy mms are waited for, killably
// and in mm order (so two tracers never wait for each other's locks), and
// their write locks are kept: the next pass, which must be made because a
// busy process may have forked in between (its child copied the text
// without the change and is not on the list), takes dup_mmap_sem again with
// them held (legal: nobody sleeps on an mmap lock while holding
// dup_mmap_sem in this design) and handles them first-hand. So an mm waited
// for is never lost to a process that takes its lock again at once, and
// every pass but the last has waited for at least one busy mm.
//
// Removal (nc == nil) runs as removalWaiter: it completes even if the
// caller is killed (patch 8).
func (u *Uprobes) registerForEachVMAAfter(w locking.Waiter, up *Uprobe, nc *Consumer) error {
	isRegister := nc != nil
	if !isRegister && !u.hooks.undoKilledRemoval {
		w = removalWaiter{w}
	}
	var held []*mm.MM // write-locked, with a user reference, for the next pass
	var err error
	for {
		u.passes.Add(1)
		u.DupMmapSem.DownWrite(w)
		var busy []*mm.MM
		var put []*mm.MM // user references dropped after dup_mmap_sem (patch 2)
		for _, info := range buildMapInfo(up.Inode, up.Offset, isRegister) {
			m := info.mm
			if err != nil && isRegister {
				put = append(put, m)
				continue
			}
			locked := slices.Contains(held, m)
			if !locked && u.hooks.undoTrylock {
				m.MmapWriteLock(w)
			} else if !locked && !m.MmapWriteTrylock() {
				if slices.Contains(busy, m) {
					put = append(put, m) // mapped twice: one reference kept is enough
				} else {
					busy = append(busy, m)
				}
				continue
			}
			if e := u.visit(w, up, nc, m, info.vaddr); e != nil && err == nil {
				err = e
			}
			if !locked {
				m.MmapWriteUnlock()
			}
			put = append(put, m)
		}
		for _, m := range held {
			m.MmapWriteUnlock()
			put = append(put, m)
		}
		held = nil
		if u.hooks.undoPutOutside {
			for _, m := range put {
				mmput(m)
			}
			put = nil
		}
		u.DupMmapSem.UpWrite()
		// The last reference to an mm that exited meanwhile runs
		// exit_mmap(): never under dup_mmap_sem.
		for _, m := range put {
			mmput(m)
		}
		sched.At("register_for_each_vma", "pass done")
		if len(busy) == 0 || err != nil && isRegister {
			for _, m := range busy {
				mmput(m)
			}
			return err
		}
		slices.SortFunc(busy, func(a, b *mm.MM) int { return int(a.ID - b.ID) })
		for i, m := range busy {
			if e := m.MmapWriteLockKillable(w); e != nil {
				for _, hm := range held {
					hm.MmapWriteUnlock()
					mmput(hm)
				}
				for _, bm := range busy[i:] {
					mmput(bm)
				}
				return e
			}
			held = append(held, m)
			if u.hooks.waited != nil {
				u.hooks.waited(m)
			}
		}
	}
}

// visit is the body of register_for_each_vma()'s loop for one mm whose
// mmap lock the caller holds for write: re-find the VMA, then install (nc's
// filter wants m) or remove (no consumer left wants m) the breakpoint.
func (u *Uprobes) visit(w locking.Waiter, up *Uprobe, nc *Consumer, m *mm.MM, vaddr uint64) error {
	isRegister := nc != nil
	v := m.FindVMA(vaddr)
	if v == nil || !validVMA(v, isRegister) || v.File.Inode != up.Inode ||
		v.Start > vaddr || vaddrToOffset(v, vaddr) != up.Offset {
		return nil
	}
	if isRegister {
		if nc.wants(m) {
			return u.installBreakpoint(w, up, m, v, vaddr)
		}
		return nil
	}
	if m.FlagTest(mm.MMF_HAS_UPROBES) && !up.filterChain(m) {
		return u.removeBreakpoint(w, m, v, vaddr, up)
	}
	return nil
}
