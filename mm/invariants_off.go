//go:build !invariants

package mm

// invariants turns on the expensive consistency checks (checkInvariants
// after every operation). Build with -tags invariants to enable them.
const invariants = false
