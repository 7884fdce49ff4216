// Package forkstall is the live runner of seed 000's fork-stall experiment
// (its definition is mmlab/experiment/forkstall): a busy process keeps its
// mmap_lock busy (mmap(SIZE, MAP_POPULATE)/munmap in a loop), a forker times
// every fork(), and this process attaches, holds and detaches uprobes with
// mmlab/live/uprobe. The longest fork that started inside an attach or
// detach window is the figure; a baseline window of the same length with
// nothing attaching, taken between the runs, gives the verdict.
//
// Kernels without the fix (register_for_each_vma sleeping on a busy mm's
// mmap_lock while it holds dup_mmap_sem for write) stall every fork() for as
// long as the busy process holds its lock.
//
// The busy process and the holder of idle processes are re-executions of
// mmlab in the roles this package registers with mmlab/live; they fork
// through a raw clone(SIGCHLD) (rawfork_linux.go). The forker is
// live.ForkHelperELF's static helper, the process the simulation forks
// (startForker).
package forkstall

import "time"

// The live run's pauses.
const (
	hold = 200 * time.Millisecond // how long the probes stay attached
	gap  = 500 * time.Millisecond // pause after a detach and after a baseline window
)

// hooks are set by the tests (export_test.go).
var hooks struct {
	// forkInEveryWindow makes each window (attach, detach, baseline) end
	// only once a fork that started inside it has been recorded.
	forkInEveryWindow bool
	// probedDir, if set, is told the directory of each run's probed copy.
	probedDir func(dir string)
}
