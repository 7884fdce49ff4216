//go:build invariants

package mm

const invariants = true
