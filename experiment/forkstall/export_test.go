package forkstall

import "time"

// SetSimZap makes each munmap of the sim's busy process hold its mm's lock
// for read for d first, and returns the restore.
func SetSimZap(d time.Duration) (restore func()) {
	old := simZap
	simZap = d
	return func() { simZap = old }
}
