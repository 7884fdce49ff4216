//go:build !amd64

package uprobe

// The probe targets are x86-64 machine code; elsewhere there are none and
// Targets reports live.ErrNotSupported.

const haveTargets = false

func targetPC(which int) uintptr    { return 0 }
func callLoop(pc uintptr, n uint64) { panic("uprobe: no probe targets on this architecture") }

func redzoneLoop(pc uintptr, n uint64) (uint64, uint64) {
	panic("uprobe: no probe targets on this architecture")
}
