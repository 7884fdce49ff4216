package trace

import (
	"fmt"

	"mmlab/machine"
)

// UserAddrEnd is the end of the user address space of a machine with
// features f: TASK_SIZE plus its last page, never mapped (2^47, or 2^56 with
// 5-level paging). An arena must end at or below it on that machine.
func UserAddrEnd(f machine.Features) uint64 { return f.TaskSize() + PageSize }

// ValidateFor is Validate for a run on a machine with features f: Parse's
// rules, which hold on every machine, and the one that depends on it: the
// arena ends at or below UserAddrEnd(f). Parse cannot check that one, as a
// trace is parsed before a target, and so a machine, is chosen; both
// targets' runners call ValidateFor with their machine's features first,
// so that on one machine they refuse the same Programs with the same error.
// Low addresses need no such rule: the kernel answers for them (a hint
// raised to mmap_min_addr, EPERM for a fixed address below vm.mmap_min_addr
// without CAP_SYS_RAWIO), and the model answers with f.
func (p *Program) ValidateFor(f machine.Features) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if end := UserAddrEnd(f); p.ArenaHi > end {
		paging := "4-level paging"
		if f.LA57 {
			paging = "5-level paging"
		}
		return fmt.Errorf("invalid trace: arena %#x-%#x ends above this machine's user address space, %#x (%s)",
			p.ArenaLo, p.ArenaHi, end, paging)
	}
	return nil
}
