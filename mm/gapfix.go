package mm

import (
	"fmt"

	"mmlab/design"
	"mmlab/machine"
)

// GapFix is the kernel's answer to the mremap gap (docs/mremap-gap.md):
// mm/mremap.c:mremap_to() unmaps the destination with do_munmap() before
// move_vma() stores the moved VMA, so for a moment the range is empty in the
// tree, and a reader under per-VMA locks (fs/proc/task_mmu.c's maps walk and
// PROCMAP_QUERY, through lock_next_vma()) that arrives then misses it. The
// two fixes are model choices the kernel does not make (v6.19 has
// GapFixNone). The zero GapFix is unset: NewWith refuses it
// (design.ErrUnset).
type GapFix int

const (
	// GapFixNone is v6.19: mremap_to() unmaps the destination first.
	GapFixNone GapFix = iota + 1
	// GapFixGather does mremap onto a mapped range the way
	// mm/vma.c:__mmap_region() does MAP_FIXED since Liam R. Howlett's
	// "Avoid MAP_FIXED gap exposure": the destination's VMAs are gathered
	// (vms_gather_munmap_vmas(): split, write-locked, marked detached) and
	// stay in the tree, their page tables are cleared while they are there
	// (vms_clean_up_area()), the moved VMA is stored over them in one tree
	// write and only then is the unmap completed
	// (vms_complete_munmap_vmas()). A move that fails after the clean-up
	// ends as vms_abort_munmap_vmas() ends then: the range is left empty
	// and the unmap completed, which is what v6.19's mremap_to() leaves
	// (see mremapToGathered).
	GapFixGather
	// GapFixQueryConfirm leaves mremap as v6.19 has it and changes
	// PROCMAP_QUERY alone (package procfs, do_procmap_query()): an ENOENT
	// found under per-VMA locks while an mmap write section was active
	// (mm_lock_seq odd, or changed during the lookup) is confirmed by
	// looking again under mmap_read_lock. The maps text is not fixed.
	GapFixQueryConfirm
)

// GapFixes are the designs, v6.19's first, named "v6.19", "gather" and
// "query-confirm".
var GapFixes = design.NewSet[GapFix]("mremap gap fix", "v6.19", "gather", "query-confirm")

// String returns the design's name.
func (g GapFix) String() string { return GapFixes.String(g) }

// MarshalText returns the design's name.
func (g GapFix) MarshalText() ([]byte, error) { return GapFixes.Marshal(g) }

// UnmarshalText sets g to the design named text.
func (g *GapFix) UnmarshalText(text []byte) error { return GapFixes.Unmarshal(g, text) }

// Config is the kernel an address space runs in, as far as it is a design
// choice of the model: chosen at NewWith and inherited by every fork of it.
type Config struct {
	// GapFix is the answer to the mremap gap; it must be set.
	GapFix GapFix
}

// NewWith is New in a kernel of design c. It refuses an unset c.GapFix
// (design.ErrUnset).
func NewWith(ns *Namespace, f machine.Features, c Config) (*MM, error) {
	if err := GapFixes.Check(c.GapFix); err != nil {
		return nil, fmt.Errorf("mm: %w", err)
	}
	m := New(ns, f)
	m.gapFix = c.GapFix
	return m, nil
}

// GapFix returns the address space's answer to the mremap gap (what
// package procfs's PROCMAP_QUERY asks).
func (m *MM) GapFix() GapFix { return m.gapFix }
