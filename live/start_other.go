//go:build !linux

package live

// watchParent does nothing: no helper starts on this system.
func watchParent() {}
