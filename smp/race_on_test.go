//go:build race

package smp_test

// raceEnabled: the race detector makes the ticket-lock sweep's sim runs
// tens of times slower, and they have no concurrency to check.
const raceEnabled = true
