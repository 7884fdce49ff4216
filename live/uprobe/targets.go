package uprobe

import "mmlab/cpu"

// Target is one probe site inside this binary.
type Target struct {
	// Name is "nop", "nop5", "ret", "sled" or "redzone".
	Name string
	// PC is the address of its first instruction in this process.
	PC uintptr
	// Path is the executable file that holds it, as mapped, and Offset its
	// file offset there: what a uprobe is attached to.
	Path   string
	Offset uint64
	// Code is the machine code expected at Offset, checked in the file.
	Code []byte
}

// targetSpecs lists the targets of targets_amd64.s in targetPC order and the
// bytes each must start with.
var targetSpecs = []struct {
	name string
	code []byte
}{
	{"nop", []byte{0x90, 0xc3}},                          // nop; ret
	{"nop5", []byte{0x0f, 0x1f, 0x44, 0x00, 0x00, 0xc3}}, // nopl 0x0(%rax,%rax,1); ret
	{"ret", []byte{0xc3}},                                // ret
	{"sled", sledCode()},                                 // 64 x nop; ret
	{"redzone", redZoneCode()},                           // cpu.RedZoneTarget
}

func redZoneCode() []byte {
	code, _, _ := cpu.RedZoneTarget()
	return code
}

// SledLen is the number of one-byte nops in the "sled" target: that many
// distinct probe sites at Offset, Offset+1, ...
const SledLen = 64

func sledCode() []byte {
	b := make([]byte, SledLen+1)
	for i := range SledLen {
		b[i] = 0x90
	}
	b[SledLen] = 0xc3
	return b
}
