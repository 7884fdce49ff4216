// Package maptear runs the /proc/PID/maps tearing check of
// mmlab/experiment/maptear against the live kernel: the check's protocol
// (maptear.Check) reads the maps of a child process, a re-execution of the
// running binary in the helper role "maptear-child", which holds the pieces
// and, once told to run free, modifies and restores the boundary VMA back to
// back by itself, so that the race window is the kernel's: no step of the
// modifier waits for the reader.
package maptear
