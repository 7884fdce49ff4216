package explore

import (
	"errors"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"mmlab/live/procmaps"
)

// The live side of the PROCMAP_QUERY finding that TestAfterFindings pins:
// the running kernel's task moves a spare page onto the second page of a
// two-page VMA with mremap(MREMAP_MAYMOVE|MREMAP_FIXED), which unmaps the
// destination first (mm/mremap.c:mremap_to), and maps the spare again,
// while this one asks PROCMAP_QUERY about the destination. Beyond it lies
// a VMA of another protection that the move does not write-lock, so
// lock_next_vma finds it, and its recheck under the writer's mmap_lock
// finds the same gap: ENOENT. The test asserts that no answer names a VMA
// that does not cover the address, and logs how many were ENOENT (the
// model's finding, as the kernel shows it; a race, so not asserted).
func TestQueryGapLive(t *testing.T) {
	if testing.Short() {
		t.Skip("a live race of some seconds")
	}
	const page = 4096
	arena, err := unix.Mmap(-1, 0, 3*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(arena)
	if err := unix.Mprotect(arena[2*page:], unix.PROT_READ); err != nil {
		t.Fatal(err)
	}
	spareMap, err := unix.Mmap(-1, 0, page, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	spare := uintptr(unsafe.Pointer(&spareMap[0]))
	defer unix.Munmap(spareMap)
	dst := uintptr(unsafe.Pointer(&arena[0])) + page

	r, err := procmaps.Open(os.Getpid())
	if err != nil {
		t.Skip(err)
	}
	defer r.Close()
	const moves = 20000
	var done atomic.Bool
	moveErr := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer done.Store(true)
		for range moves {
			if _, _, e := unix.Syscall6(unix.SYS_MREMAP, spare, page, page, unix.MREMAP_MAYMOVE|unix.MREMAP_FIXED, dst, 0); e != 0 {
				moveErr <- e
				return
			}
			if _, _, e := unix.Syscall6(unix.SYS_MMAP, spare, page, unix.PROT_READ|unix.PROT_EXEC,
				unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED, ^uintptr(0), 0); e != 0 {
				moveErr <- e
				return
			}
		}
		moveErr <- nil
	}()
	queries, gaps := 0, 0
	for !done.Load() {
		queries++
		v, err := r.Lookup(uint64(dst))
		switch {
		case errors.Is(err, unix.ENOENT):
			gaps++
		case err != nil:
			t.Fatal(err)
		case v.Start > uint64(dst) || v.End <= uint64(dst):
			t.Fatalf("PROCMAP_QUERY(%#x) returned %#x-%#x, which does not cover it", dst, v.Start, v.End)
		}
	}
	if err := <-moveErr; err != nil {
		t.Fatalf("modifier: %v", err)
	}
	t.Logf("%d moves: %d queries of the destination, %d ENOENT", moves, queries, gaps)
}
