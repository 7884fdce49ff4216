package uprobe

// Implemented in targets_amd64.s. The five targets are called only from
// assembly (callLoop) and found by targetPC, never called from Go.

//lint:ignore U1000 called from assembly
func uprobeTargetNop()

//lint:ignore U1000 called from assembly
func uprobeTargetNop5()

//lint:ignore U1000 called from assembly
func uprobeTargetRet()

//lint:ignore U1000 called from assembly
func uprobeSled()

//lint:ignore U1000 called from assembly
func uprobeRedZone()

func targetPC(which int) uintptr
func callLoop(pc uintptr, n uint64)
func redzoneLoop(pc uintptr, n uint64) (corrupted, mask uint64)

const haveTargets = true
