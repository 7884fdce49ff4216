// Package mapscan runs Paul McKenney's proc-mmap_sem-test, the benchmark of
// seed 003, against the running kernel, with real processes: a mapper that
// re-maps (MAP_FIXED | MAP_POPULATE) or unmaps random pages of a 128 MiB
// anonymous region on CPU 0, timing every call; two scanners that read the
// mapper's /proc/PID/maps in a loop (4 KiB read()s of the text, or a
// PROCMAP_QUERY walk) at nice 15 on CPU 1; and a normal-priority busy task
// on CPU 1 that spins 2 ms and sleeps 1 ms. Figures and cases are those of
// mmlab/experiment/mapscan, the model's run.
//
// The helpers are re-executions of the running binary: any program that
// imports this package becomes a helper when started with the environment
// variable MMLAB_MAPSCAN_ROLE set (see helper_linux.go).
package mapscan
