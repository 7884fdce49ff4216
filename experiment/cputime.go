package experiment

import (
	"time"

	"mmlab/sched"
)

// ThreadCPUTime is sched.ThreadCPUTime: the CPU time of the calling OS
// thread, the clock of a run on a locked thread that a loaded machine
// distorts least.
func ThreadCPUTime() (time.Duration, bool) { return sched.ThreadCPUTime() }
