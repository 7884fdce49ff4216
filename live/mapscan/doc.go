// Package mapscan runs Paul McKenney's proc-mmap_sem-test, the benchmark of
// seed 003 defined in mmlab/experiment/mapscan, against the running kernel,
// with real processes: a mapper alone on CPU 0 that re-maps (MAP_FIXED |
// MAP_POPULATE) or unmaps random pages of a populated 128 MiB anonymous
// region, timing every call; two scanners that read the mapper's
// /proc/PID/maps in a loop (4 KiB read()s of the text, or a PROCMAP_QUERY
// walk) at nice 15, on a machine with 4 or more CPUs one on CPU 2 and one
// on CPU 3 as run-proc-vs-map.sh places them, on fewer both on CPU 1, each
// with a normal-priority busy-waiter on its CPU that spins --busyduration
// and sleeps 1 ms. Each helper's Go runtime threads are SCHED_IDLE, so that
// the helpers load their CPUs as the seed's single-threaded ones do.
//
// The lock figures come from the kernel's lock:contention_begin and
// lock:contention_end tracepoints of the mapper's and the scanners'
// threads, recorded in a private ftrace instance (mmlab/live/tracefs) that
// each run creates and removes; see lockwait_linux.go for what they cannot show.
//
// The helpers are re-executions of the running binary in the roles
// mapscan-mapper, mapscan-scanner and mapscan-busy (live.RegisterRole).
package mapscan
