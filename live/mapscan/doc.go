// Package mapscan runs Paul McKenney's proc-mmap_sem-test, the benchmark of
// seed 003 defined in mmlab/experiment/mapscan, against the running kernel,
// with real processes: a mapper that re-maps (MAP_FIXED | MAP_POPULATE) or
// unmaps random pages of a 128 MiB anonymous region on CPU 0, timing every
// call; two scanners that read the mapper's /proc/PID/maps in a loop (4 KiB
// read()s of the text, or a PROCMAP_QUERY walk) at nice 15 on CPU 1; and a
// normal-priority busy task on CPU 1 that spins 2 ms and sleeps 1 ms.
//
// The helpers are re-executions of the running binary in the roles
// mapscan-mapper, mapscan-scanner and mapscan-busy (live.RegisterRole).
package mapscan
