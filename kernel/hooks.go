package kernel

// testHooks are a machine's test hooks, set only from export_test.go
// before the machine makes its first process; every one is false outside
// tests. A process made with uprobes (NewTaskMMWith) takes its machine's,
// and its forks inherit them with its Config.
type testHooks struct {
	// Mutations: each undoes one of seed 000's fixes in the after design of
	// dup_mm (forkAfter), so that a test can show a checker finds it.
	undoTeardownOutside bool // patch 2: a failed child is torn down inside dup_mmap_sem
	undoTrylock         bool // patch 6: sleep on the parent's mmap lock under dup_mmap_sem
	undoEarlyMM         bool // patch 7: tsk->mm is set after dup_mmap_sem, as before
}
