package experiment

import (
	"mmlab/kernel"
	"mmlab/mm"
)

// ModelFile returns a model file named name that holds code.
func ModelFile(name string, code []byte) *mm.Inode {
	return mm.NewInode(name, uint64(len(code)), func(off uint64) byte { return code[off] })
}

// ModelProcess returns the task of a new model process whose mm calls up
// into hooks (the model kernel's uprobes), maps file read-execute at text
// and has stack bytes of anonymous read-write memory ending at stackTop:
// the address space a model runner's process runs its code in.
func ModelProcess(comm string, hooks mm.Hooks, file *mm.File, text, stackTop, stack uint64) (*kernel.Task, error) {
	t := kernel.NewTaskMM(comm)
	t.MM.Hooks = hooks
	if _, err := t.MM.Mmap(nil, text, file.Inode.Size, mm.PROT_READ|mm.PROT_EXEC, mm.MAP_PRIVATE|mm.MAP_FIXED, file, 0); err != nil {
		return nil, err
	}
	if _, err := t.MM.Mmap(nil, stackTop-stack, stack, mm.PROT_READ|mm.PROT_WRITE, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED, nil, 0); err != nil {
		return nil, err
	}
	return t, nil
}
