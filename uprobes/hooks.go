package uprobes

import "mmlab/mm"

// testHooks are an Uprobes' test step points, set only from export_test.go
// before the Uprobes is used; every one is nil or false outside tests.
type testHooks struct {
	// waited runs in the after design's register_for_each_vma each time
	// it has taken the write lock of an mm it found busy.
	waited func(m *mm.MM)
	// textWrite runs before each write of int3_update() (n is writeInt3,
	// writeTail or writeHead) to the site at vaddr of m.
	textWrite func(m *mm.MM, vaddr uint64, n int)

	// Mutations: each undoes one of seed 000's fixes in the after design,
	// so that a test can show a checker finds it.
	undoTrylock       bool // patch 5: register_for_each_vma sleeps on mmap locks under dup_mmap_sem
	undoKilledRemoval bool // patch 8: a killed task's removal stops half-way
	undoFinish        bool // patch 3: a half-written optimized site is restored by its first byte only
	undoNoWarn        bool // patch 4: a failed write of an optimized site warns
	undoPutOutside    bool // patch 2: register_for_each_vma puts its mms under dup_mmap_sem
}
