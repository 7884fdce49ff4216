//go:build !invariants

package sched

// invariants turns on the expensive checks of deterministic runs: every
// preemption point and sleep checks that it is called by the goroutine of
// the running thread, not by a goroutine outside the run, and every ranked
// acquisition is checked against lockrank.Order (AcquiredClass). Build
// with -tags invariants to enable them.
const invariants = false
