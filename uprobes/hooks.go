package uprobes

import "mmlab/mm"

// hooks are the package's test step points, set only from tests
// (export_test.go). textWrite runs before each write of int3_update() (n is
// writeInt3, writeTail or writeHead) to the site at vaddr of m.
var hooks struct {
	textWrite func(m *mm.MM, vaddr uint64, n int)
}
