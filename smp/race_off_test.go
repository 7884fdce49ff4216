//go:build !race

package smp_test

const raceEnabled = false
