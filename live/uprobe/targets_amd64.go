package uprobe

// Implemented in targets_amd64.s.

func uprobeTargetNop()
func uprobeTargetNop5()
func uprobeTargetRet()
func uprobeSled()

func targetPC(which int) uintptr
func callLoop(pc uintptr, n uint64)

const haveTargets = true
