package rcu

// SetWaitHook sets fn to be called when a grace period of s first finds
// readers it must wait for, so that tests of other packages (uprobes) can
// tell, without timing, that a grace period is held up by a reader. Set it
// before any grace period of s starts.
func (s *SRCU) SetWaitHook(fn func()) { s.waitHook = fn }

// SetWaitHook sets fn to be called when a grace period of tt has inspected
// every thread and found holdouts to wait for. Set it before any grace
// period of tt starts.
func (tt *TasksTrace) SetWaitHook(fn func()) { tt.waitHook = fn }
