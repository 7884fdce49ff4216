package procfs

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"mmlab/mm"
)

// liveLine maps length bytes at addr in this process and returns the line
// /proc/self/maps shows for it.
func liveLine(t *testing.T, addr, length uintptr, prot, flags int, fd int) string {
	t.Helper()
	got, _, errno := unix.Syscall6(unix.SYS_MMAP, addr, length, uintptr(prot), uintptr(flags|unix.MAP_FIXED_NOREPLACE), uintptr(fd), 0)
	if errno != 0 || got != addr {
		t.Skipf("mmap at %#x: %v", addr, errno)
	}
	t.Cleanup(func() { unix.Syscall(unix.SYS_MUNMAP, addr, length, 0) })
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	prefix := strconv.FormatUint(uint64(addr), 16) + "-"
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			return sc.Text() + "\n"
		}
	}
	t.Fatalf("no maps line for %#x", addr)
	return ""
}

// TestShowMapVMAMatchesKernel compares ShowMapVMA with the kernel's own line
// for the same mapping, byte for byte (the device, which the model does not
// have, is set to the model's 00:00 in the kernel's line; the inode number
// is given to the model).
func TestShowMapVMAMatchesKernel(t *testing.T) {
	const base = 0x10f000000000
	anon := liveLine(t, base, 3*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS, -1)
	v := &mm.VMA{Start: base, End: base + 3*4096, Flags: mm.VM_READ | mm.VM_WRITE | mm.VM_MAYREAD | mm.VM_MAYWRITE | mm.VM_MAYEXEC, Pgoff: base >> 12}
	if got := string(ShowMapVMA(nil, v)); got != anon {
		t.Errorf("anon:\n got %q\nwant %q", got, anon)
	}

	path, fd := openTempFile(t, 8*4096, unix.O_RDWR)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	file := liveLine(t, base+0x10000, 2*4096, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_SHARED, fd)
	dev := strings.Fields(file)[3]
	file = strings.Replace(file, " "+dev+" ", " 00:00 ", 1)
	in := mm.NewInode(new(mm.Namespace), path, 8*4096, nil)
	in.Ino = st.Ino
	fv := &mm.VMA{Start: base + 0x10000, End: base + 0x12000, File: mm.Open(in),
		Flags: mm.VM_READ | mm.VM_EXEC | mm.VM_SHARED | mm.VM_MAYSHARE | mm.VM_MAYREAD | mm.VM_MAYWRITE | mm.VM_MAYEXEC}
	if got := string(ShowMapVMA(nil, fv)); got != file {
		t.Errorf("file:\n got %q\nwant %q", got, file)
	}
}

// openTempFile writes a file of size zero bytes in a temporary directory
// and opens it with flag; the file is closed when the test ends.
func openTempFile(t *testing.T, size, flag int) (string, int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mapped-file")
	if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(path, flag, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return path, fd
}
