//go:build !unix

package mt

// cpuTime is not measured on this OS.
func cpuTime() int64 { return 0 }
