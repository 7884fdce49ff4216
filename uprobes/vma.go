package uprobes

import (
	"mmlab/cpu"
	"mmlab/errno"
	"mmlab/kernel"
	"mmlab/locking"
	"mmlab/mm"
	"mmlab/mm/pgtable"
)

// swbp is the x86 breakpoint, int3 (UPROBE_SWBP_INSN).
const swbp = 0xcc

// validVMA mirrors valid_vma(): a private, may-exec file mapping that is
// not hugetlb and, when registering, not writable now.
func validVMA(v *mm.VMA, isRegister bool) bool {
	flags := mm.VM_HUGETLB | mm.VM_MAYEXEC | mm.VM_MAYSHARE
	if isRegister {
		flags |= mm.VM_WRITE
	}
	return v.File != nil && v.Flags&flags == mm.VM_MAYEXEC
}

// offsetToVaddr and vaddrToOffset mirror the kernel helpers of the same
// names.
func offsetToVaddr(v *mm.VMA, off uint64) uint64 {
	return v.Start + off - v.Pgoff<<pgtable.PageShift
}

func vaddrToOffset(v *mm.VMA, vaddr uint64) uint64 {
	return v.Pgoff<<pgtable.PageShift + vaddr - v.Start
}

// mmgetNotZero mirrors mmget_not_zero(): a user reference unless the mm is
// already being torn down.
func mmgetNotZero(m *mm.MM) bool { return incNotZero(&m.Users) }

// mmput mirrors mmput(): the last user tears the mm down.
func mmput(m *mm.MM) {
	if m.Users.Add(-1) == 0 {
		m.Exit()
	}
}

// mapInfo mirrors struct map_info: one (mm, vaddr) to visit.
type mapInfo struct {
	mm    *mm.MM
	vaddr uint64
}

// buildMapInfo mirrors build_map_info(): under i_mmap_rwsem (read), every
// valid VMA of the file covering offset, each mm with a user reference. An
// mm that maps the page twice appears twice.
func buildMapInfo(in *mm.Inode, offset uint64, isRegister bool) []mapInfo {
	var out []mapInfo
	for _, v := range in.IMmap(offset>>pgtable.PageShift, 1) {
		if !validVMA(v, isRegister) || !mmgetNotZero(v.MM) {
			continue
		}
		out = append(out, mapInfo{v.MM, offsetToVaddr(v, offset)})
	}
	return out
}

// registerForEachVMA mirrors register_for_each_vma() (the "before" design
// of seed 000, v6.19): with dup_mmap_sem held for write, so that no fork
// copies an mm half-way through, visit every mm that maps the probed page,
// take its mmap lock for write (sleeping on a busy mm while dup_mmap_sem is
// held: the seed's stall), and install the breakpoint (nc != nil: if nc's
// filter wants the mm) or remove it (nc == nil: if no consumer left wants
// the mm). The mmap write lock keeps a breakpoint from appearing between
// the hit path's registry miss and its is_trap_at_addr check.
func (u *Uprobes) registerForEachVMA(w locking.Waiter, up *Uprobe, nc *Consumer) error {
	if u.design == kernel.DesignAfter {
		return u.registerForEachVMAAfter(w, up, nc)
	}
	isRegister := nc != nil
	u.DupMmapSem.DownWrite(w)
	defer u.DupMmapSem.UpWrite()
	var err error
	for _, info := range buildMapInfo(up.Inode, up.Offset, isRegister) {
		m := info.mm
		if err != nil && isRegister {
			mmput(m)
			continue
		}
		m.MmapWriteLock(w)
		v := m.FindVMA(info.vaddr)
		if v != nil && validVMA(v, isRegister) && v.File.Inode == up.Inode &&
			v.Start <= info.vaddr && vaddrToOffset(v, info.vaddr) == up.Offset {
			if isRegister {
				if nc.wants(m) {
					err = u.installBreakpoint(w, up, m, v, info.vaddr)
				}
			} else if m.FlagTest(mm.MMF_HAS_UPROBES) && !up.filterChain(m) {
				if e := u.removeBreakpoint(w, m, v, info.vaddr, up); e != nil && err == nil {
					err = e
				}
			}
		}
		m.MmapWriteUnlock()
		mmput(m)
	}
	return err
}

// prepare mirrors prepare_uprobe() with copy_insn() and x86's
// arch_uprobe_analyze_insn(): once per uprobe, copy the original bytes from
// the page cache and decide how the instruction is passed. ENOTSUPP for an
// instruction that is already a trap or that x86 refuses (and, in the
// model, for one outside the interpreter's subset, which could not run
// anyway).
func (up *Uprobe) prepare() error {
	if up.copied.Load() {
		return nil
	}
	up.consumerMu.Lock()
	defer up.consumerMu.Unlock()
	if up.copied.Load() {
		return nil
	}
	in := up.Inode
	n := 0
	for ; n < len(up.orig) && up.Offset+uint64(n) < in.Size; n++ {
		off := up.Offset + uint64(n)
		up.orig[n] = in.Cache.Get(off >> pgtable.PageShift).ByteAt(int(off & (pgtable.PageSize - 1)))
	}
	if n == 0 || up.orig[0] == swbp {
		return errno.ENOTSUPP
	}
	insn, err := cpu.Decode(up.orig[:min(n, cpu.MaxInsnLen)])
	if err != nil || insn.Class == cpu.Reject {
		return errno.ENOTSUPP
	}
	up.insn = insn
	up.canOptimize = up.u.opt != OptimizeOff && insn.CanOptimize(up.Offset)
	up.copied.Store(true) // smp_wmb(); set_bit(UPROBE_COPY_INSN)
	return nil
}

// installBreakpoint mirrors install_breakpoint(): MMF_HAS_UPROBES is set
// before the int3 is written, since a thread may hit it at once.
func (u *Uprobes) installBreakpoint(w locking.Waiter, up *Uprobe, m *mm.MM, v *mm.VMA, vaddr uint64) error {
	if err := up.prepare(); err != nil {
		return err
	}
	first := !m.FlagTest(mm.MMF_HAS_UPROBES)
	m.FlagSet(mm.MMF_HAS_UPROBES)
	err := u.setSwbp(w, up, m, v, vaddr)
	if err == nil {
		m.FlagClear(mm.MMF_RECALC_UPROBES)
	} else if first {
		m.FlagClear(mm.MMF_HAS_UPROBES)
	}
	return err
}

// removeBreakpoint mirrors remove_breakpoint().
func (u *Uprobes) removeBreakpoint(w locking.Waiter, m *mm.MM, v *mm.VMA, vaddr uint64, up *Uprobe) error {
	m.FlagSet(mm.MMF_RECALC_UPROBES)
	return u.setOrigInsn(w, up, m, v, vaddr)
}

// write mirrors uprobe_write_opcode() with verify_opcode(): install writes
// int3 unless it is there; removal writes the original byte back only over
// an int3.
func (u *Uprobes) write(w locking.Waiter, m *mm.MM, v *mm.VMA, vaddr uint64, b []byte, register bool) error {
	verify := func(cur []byte) bool { return (cur[0] == swbp) != register }
	return m.UprobeWrite(w, v, vaddr, b, register, verify, func() { u.machine.FlushTLB(m, w) })
}

// probesIn mirrors build_probe_list(): the uprobes of v's file whose offset
// falls in [start,end) of v, each with a reference.
func (u *Uprobes) probesIn(v *mm.VMA, start, end uint64) []*Uprobe {
	in := v.File.Inode
	lo, hi := vaddrToOffset(v, start), vaddrToOffset(v, end)
	t := *u.tree.Load()
	var out []*Uprobe
	for i, _ := search(t, in.Ino, lo); i < len(t) && t[i].Inode.Ino == in.Ino && t[i].Offset < hi; i++ {
		if t[i].tryGet() {
			out = append(out, t[i])
		}
	}
	return out
}

// vmaHasUprobes mirrors vma_has_uprobes().
func (u *Uprobes) vmaHasUprobes(v *mm.VMA, start, end uint64) bool {
	in := v.File.Inode
	lo, hi := vaddrToOffset(v, start), vaddrToOffset(v, end)
	t := *u.tree.Load()
	i, _ := search(t, in.Ino, lo)
	return i < len(t) && t[i].Inode.Ino == in.Ino && t[i].Offset < hi
}

// MmapFile mirrors uprobe_mmap() (mm.Hooks): a new or changed file VMA gets
// the breakpoints of every uprobe in its range that a consumer wants for
// this mm. Called with the mmap lock held for write; errors are ignored, as
// the kernel ignores them.
func (u *Uprobes) MmapFile(m *mm.MM, v *mm.VMA) {
	if u.noEvents() || !validVMA(v, true) {
		return
	}
	mu := &u.mmapMutex[v.File.Inode.Ino%uint64(len(u.mmapMutex))]
	mu.DownWrite(nil)
	defer mu.UpWrite()
	for _, up := range u.probesIn(v, v.Start, v.End) {
		if up.filterChain(m) {
			_ = u.installBreakpoint(nil, up, m, v, offsetToVaddr(v, up.Offset))
		}
		up.put()
	}
}

// Munmap mirrors uprobe_munmap() (mm.Hooks): nothing is removed (the pages
// go with the mapping); MMF_RECALC_UPROBES asks the hit path to recompute
// MMF_HAS_UPROBES.
func (u *Uprobes) Munmap(m *mm.MM, v *mm.VMA, start, end uint64) {
	if u.noEvents() || !validVMA(v, false) || m.Users.Load() == 0 {
		return
	}
	if !m.FlagTest(mm.MMF_HAS_UPROBES) || m.FlagTest(mm.MMF_RECALC_UPROBES) {
		return
	}
	if u.vmaHasUprobes(v, start, end) {
		m.FlagSet(mm.MMF_RECALC_UPROBES)
	}
}

// DupMmap mirrors uprobe_dup_mmap() (mm.Hooks): the child inherits
// MMF_HAS_UPROBES, and must recompute it, since VM_DONTCOPY VMAs were not
// copied. The breakpoints themselves come with the anonymous text pages
// that fork copies.
func (u *Uprobes) DupMmap(old, nw *mm.MM) {
	if old.FlagTest(mm.MMF_HAS_UPROBES) {
		nw.FlagSet(mm.MMF_HAS_UPROBES)
		nw.FlagSet(mm.MMF_RECALC_UPROBES)
	}
}

// Exit mirrors uprobe_clear_state() (mm.Hooks): the mm's XOL area and its
// trampolines (arch_uprobe_clear_state) are forgotten; exit_mmap has
// unmapped them with everything else.
func (u *Uprobes) Exit(m *mm.MM) {
	u.xol.Delete(m)
	u.tramps.Delete(m)
}

// unapply mirrors unapply_uprobe(): remove up's breakpoints from m (a
// handler asked for it and no consumer wants m any more).
func (u *Uprobes) unapply(w locking.Waiter, up *Uprobe, m *mm.MM) {
	m.MmapWriteLock(w)
	defer m.MmapWriteUnlock()
	for _, v := range m.VMAs() {
		if !validVMA(v, false) || v.File.Inode != up.Inode {
			continue
		}
		off := vaddrToOffset(v, v.Start)
		if up.Offset < off || up.Offset >= off+(v.End-v.Start) {
			continue
		}
		_ = u.removeBreakpoint(w, m, v, offsetToVaddr(v, up.Offset), up)
	}
}

// recalc mirrors mmf_recalc_uprobes(): clear MMF_HAS_UPROBES if no VMA has
// a uprobe. Caller holds the mmap lock.
func (u *Uprobes) recalc(m *mm.MM) {
	for _, v := range m.VMAs() {
		if validVMA(v, false) && u.vmaHasUprobes(v, v.Start, v.End) {
			return
		}
	}
	m.FlagClear(mm.MMF_HAS_UPROBES)
}
