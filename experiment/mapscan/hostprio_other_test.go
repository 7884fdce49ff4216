//go:build !linux

package mapscan

// hostCanFIFO is false outside Linux: there are no host priorities.
func hostCanFIFO() bool { return false }
