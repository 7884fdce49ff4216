package uprobes

import "mmlab/mm"

// hooks are the package's test step points, set only from export_test.go;
// every one is nil outside tests.
var hooks struct {
	// waited runs in the after design's register_for_each_vma each time
	// it has taken the write lock of an mm it found busy.
	waited func(m *mm.MM)
	// textWrite runs before each write of int3_update() (n is writeInt3,
	// writeTail or writeHead) to the site at vaddr of m.
	textWrite func(m *mm.MM, vaddr uint64, n int)
}
