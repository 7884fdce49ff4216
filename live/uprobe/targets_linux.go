package uprobe

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"mmlab/live"
)

// Targets resolves every probe target of this binary (see Target) and checks
// that the file holds the expected machine code at each offset.
func Targets() (map[string]Target, error) {
	if !haveTargets {
		return nil, fmt.Errorf("probe targets: %w", live.Unsupported("no probe targets for %s", runtime.GOARCH))
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, fmt.Errorf("probe targets: %w", err)
	}
	ts := make(map[string]Target, len(targetSpecs))
	for i, s := range targetSpecs {
		t, err := resolve(maps, s.name, targetPC(i), s.code)
		if err != nil {
			return nil, err
		}
		ts[s.name] = t
	}
	return ts, nil
}

// LookupTarget resolves and checks one target by name.
func LookupTarget(name string) (Target, error) {
	ts, err := Targets()
	if err != nil {
		return Target{}, err
	}
	t, ok := ts[name]
	if !ok {
		return Target{}, fmt.Errorf("no probe target %q", name)
	}
	return t, nil
}

// SledOffsets returns the executable holding this binary's sled target and
// the file offsets of its first n nops (n <= SledLen): n distinct probe sites
// that the running program never executes. A copy of that file has the same
// offsets.
func SledOffsets(n int) (path string, offsets []uint64, err error) {
	if n < 1 || n > SledLen {
		return "", nil, fmt.Errorf("sled offsets: n=%d outside 1..%d", n, SledLen)
	}
	t, err := LookupTarget("sled")
	if err != nil {
		return "", nil, err
	}
	for i := range n {
		offsets = append(offsets, t.Offset+uint64(i))
	}
	return t.Path, offsets, nil
}

// resolve finds the file mapping that holds pc in maps (the text of
// /proc/self/maps), turns pc into a file offset, and checks the file.
func resolve(maps []byte, name string, pc uintptr, code []byte) (Target, error) {
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		// start-end perms pgoff dev inode path
		f := strings.Fields(sc.Text())
		if len(f) < 6 {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		pgoff, err3 := strconv.ParseUint(f[2], 16, 64)
		inode, err4 := strconv.ParseUint(f[4], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			continue
		}
		if uint64(pc) < start || uint64(pc) >= end {
			continue
		}
		path := strings.Join(f[5:], " ")
		if !strings.Contains(f[1], "x") || inode == 0 || strings.HasPrefix(path, "[") {
			return Target{}, fmt.Errorf("target %s at %#x: mapping %s %s is not file-backed text", name, pc, f[0], path)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil || st.Ino != inode {
			return Target{}, fmt.Errorf("target %s: the executable %s was replaced or deleted since exec", name, path)
		}
		t := Target{Name: name, PC: pc, Path: path, Offset: uint64(pc) - start + pgoff, Code: code}
		return t, checkTarget(t)
	}
	return Target{}, fmt.Errorf("target %s at %#x: no mapping in /proc/self/maps", name, pc)
}

// checkTarget reads the executable file at t.Offset and fails unless it
// holds t.Code there, and unless the bytes after it equal those at t.PC in
// this process's memory (so the offset really is where t.PC came from; the
// probed bytes themselves may hold a breakpoint while a probe is attached).
func checkTarget(t Target) error {
	const window = 32
	n := len(t.Code)
	file := make([]byte, n+window)
	if err := readAt(t.Path, file, int64(t.Offset)); err != nil {
		return fmt.Errorf("target %s: %w", t.Name, err)
	}
	if !bytes.Equal(file[:n], t.Code) {
		return fmt.Errorf("target %s: %s at offset %#x holds % x, want % x", t.Name, t.Path, t.Offset, file[:n], t.Code)
	}
	if t.PC == 0 {
		return nil
	}
	mem := make([]byte, window)
	if err := readAt("/proc/self/mem", mem, int64(t.PC)+int64(n)); err != nil {
		return fmt.Errorf("target %s: %w", t.Name, err)
	}
	if !bytes.Equal(mem, file[n:]) {
		return fmt.Errorf("target %s: file offset %#x of %s does not match memory at %#x", t.Name, t.Offset, t.Path, t.PC)
	}
	return nil
}

func readAt(path string, b []byte, off int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.ReadAt(b, off); err != nil {
		return fmt.Errorf("read %s at %#x: %w", path, off, err)
	}
	return nil
}
