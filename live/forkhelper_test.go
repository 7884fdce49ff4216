package live

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"math"
	"testing"
)

// The fork helper is a static x86-64 executable: one read-execute
// PT_LOAD segment at forkHelperBase holding the whole file, entered at
// its code, with what it does patched into its operands and the file's
// path, NUL-terminated, after the code.
func TestForkHelperELF(t *testing.T) {
	for _, h := range []ForkHelper{
		{Pages: 4096, Forks: 200, CPU: -1},
		{CPU: 1, File: "/tmp/probed", FileLen: 12345},
		{Forks: 3, CPU: 0, FileLen: 99}, // no file: its length is not patched in
	} {
		b := ForkHelperELF(h)
		f, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 || f.Type != elf.ET_EXEC || len(f.Progs) != 1 {
			t.Fatalf("header %+v, %d program headers", f.FileHeader, len(f.Progs))
		}
		p := f.Progs[0]
		if p.Type != elf.PT_LOAD || p.Flags != elf.PF_R|elf.PF_X || p.Off != 0 || p.Vaddr != forkHelperBase || p.Filesz != uint64(len(b)) || p.Memsz != p.Filesz {
			t.Errorf("segment %+v", p.ProgHeader)
		}
		code := b[f.Entry-forkHelperBase:]
		if len(code) != len(forkHelperCode)+len(h.File)+1 || len(b) > 4096 || string(code[len(forkHelperCode):]) != h.File+"\x00" {
			t.Errorf("%+v: entry %#x: %d bytes after it, want %d of code and the path; file %d bytes", h, f.Entry, len(code), len(forkHelperCode), len(b))
		}
		u32 := func(at int) uint32 { return binary.LittleEndian.Uint32(code[at:]) }
		wantLen, wantCPU := h.FileLen, uint32(h.CPU)
		if h.File == "" {
			wantLen = 0
		}
		if h.CPU < 0 {
			wantCPU = math.MaxUint32
		}
		if u32(forkHelperPagesAt) != h.Pages || u32(forkHelperForksAt) != h.Forks || u32(forkHelperFileLenAt) != wantLen || u32(forkHelperCPUAt) != wantCPU {
			t.Errorf("%+v: patched pages %d, forks %d, file length %d, CPU %#x", h, u32(forkHelperPagesAt), u32(forkHelperForksAt), u32(forkHelperFileLenAt), u32(forkHelperCPUAt))
		}
	}
}

// ParseForkRecords reads 16-byte records and leaves a partial one out.
func TestParseForkRecords(t *testing.T) {
	var b []byte
	b = binary.LittleEndian.AppendUint64(b, 7)
	b = binary.LittleEndian.AppendUint64(b, 40_000)
	b = binary.LittleEndian.AppendUint64(b, 9)
	got := ParseForkRecords(b)
	if len(got) != 1 || got[0] != (ForkRecord{7, 40_000}) {
		t.Errorf("ParseForkRecords = %v", got)
	}
}

// A record Append writes parses back as itself.
func TestForkRecordAppend(t *testing.T) {
	r := ForkRecord{Start: 1 << 40, Dur: 123_456}
	if b := r.Append(nil); len(b) != 16 || ParseForkRecord(b) != r {
		t.Errorf("Append(%v) = %x", r, b)
	}
}
