//go:build invariants

package sched

const invariants = true
