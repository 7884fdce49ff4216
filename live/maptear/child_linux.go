package maptear

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"mmlab/experiment/maptear"
	"mmlab/explore"
	"mmlab/host"
	"mmlab/live"
)

// childRole is the helper role of the modifier child.
const childRole = "maptear-child"

// childCPUEnv, if set, is the CPU the child pins its modifier thread to.
const childCPUEnv = "MMLAB_MAPTEAR_CPU"

// The child's pieces (maptear.NPieces of maptear.PiecePages pages) sit at a
// fixed low address (tried from regionBases), below the Go heap arenas at
// 0xc000000000 and above a non-PIE binary: whatever the Go runtime maps
// later lands elsewhere and, in address order, after them, so it cannot move
// the chunk boundary.
var regionBases = []uintptr{0x200000000, 0x300000000, 0x400000000, 0x800000000}

func init() { live.RegisterRole(childRole, childMain) }

func sysMmap(addr, length uintptr, prot, flags int) (uintptr, error) {
	r, _, e := unix.Syscall6(unix.SYS_MMAP, addr, length, uintptr(prot), uintptr(flags), ^uintptr(0), 0)
	if e != 0 {
		return 0, e
	}
	return r, nil
}

func sysMremap(old, oldSize, newSize uintptr, flags int, newAddr uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_MREMAP, old, oldSize, newSize, uintptr(flags), newAddr, 0)
	if e != 0 {
		return e
	}
	return nil
}

func sysMprotect(addr, length uintptr, prot int) error {
	_, _, e := unix.Syscall(unix.SYS_MPROTECT, addr, length, uintptr(prot))
	if e != 0 {
		return e
	}
	return nil
}

// sysMapper makes maptear's modifications with system calls.
type sysMapper struct{}

const anonFixed = unix.MAP_PRIVATE | unix.MAP_ANONYMOUS | unix.MAP_FIXED

func (sysMapper) MapAnon(addr, length uint64, prot int) error {
	_, err := sysMmap(uintptr(addr), uintptr(length), prot, anonFixed)
	return err
}

func (sysMapper) Resize(addr, oldLen, newLen uint64) error {
	return sysMremap(uintptr(addr), uintptr(oldLen), uintptr(newLen), 0, 0)
}

func (sysMapper) Mprotect(addr, length uint64, prot int) error {
	return sysMprotect(uintptr(addr), uintptr(length), prot)
}

// MovePage moves the last page of the VMA at next (a piece, of the other
// protection) onto dst, MREMAP_DONTUNMAP leaving an empty page in its place:
// the VMA at next stays as it is.
func (sysMapper) MovePage(dst, next uint64) error {
	p := uint64(os.Getpagesize())
	return sysMremap(uintptr(next+(maptear.PiecePages-1)*p), uintptr(p), uintptr(p),
		unix.MREMAP_FIXED|unix.MREMAP_MAYMOVE|unix.MREMAP_DONTUNMAP, uintptr(dst))
}

// childMain maps the pieces, says "ready BASE PIECES PAGES", and obeys one
// command per line on stdin, answering "ok" or "err ..." on stdout:
//
//	case NAME ADDR NEXT PROT  choose the modification
//	m / r                     modify / restore once
//	g                         modify and restore back to back, as fast as
//	                          possible, until the next line arrives (send
//	                          "s"); it stops restored and answers then
//	s                         nothing, no answer: the line that stops g
//	gap LAYOUT                map an explore.GapLayout at maptear.GapBase;
//	                          g then runs its modification instead
//	ungap                     unmap it
//	q                         exit (so does EOF on stdin)
func childMain() int {
	if cpu, err := strconv.Atoi(os.Getenv(childCPUEnv)); err == nil {
		// The modifier runs on this thread (RunRole runs on the main goroutine).
		runtime.LockOSThread()
		if err := host.Pin(cpu); err != nil {
			fmt.Printf("err %v\n", err)
			return 1
		}
	}
	page := uintptr(os.Getpagesize())
	size := maptear.NPieces * maptear.PiecePages * page
	var base uintptr
	var err error
	for _, b := range regionBases {
		if base, err = sysMmap(b, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED_NOREPLACE); err == nil {
			break
		}
	}
	if err != nil {
		fmt.Printf("err mmap of the pieces: %s\n", unix.ErrnoName(err.(unix.Errno)))
		return 1
	}
	for i := uintptr(1); i < maptear.NPieces; i += 2 {
		if err := sysMprotect(base+i*maptear.PiecePages*page, maptear.PiecePages*page, unix.PROT_READ); err != nil {
			fmt.Printf("err mprotect: %v\n", err)
			return 1
		}
	}
	fmt.Printf("ready %#x %d %d\n", base, maptear.NPieces, maptear.PiecePages)

	in := bufio.NewReader(os.Stdin)
	var c maptear.Mod
	var gap *explore.GapPlan // the gap layout mapped, if any
	reply := func(err error) {
		if err != nil {
			os.Stdout.WriteString("err " + err.Error() + "\n")
			return
		}
		os.Stdout.WriteString("ok\n")
	}
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			return 0
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "case":
			if len(f) != 5 {
				reply(fmt.Errorf("bad command %q", line))
				continue
			}
			addr, err1 := strconv.ParseUint(f[2], 0, 64)
			next, err2 := strconv.ParseUint(f[3], 0, 64)
			prot, err3 := strconv.Atoi(f[4])
			if err1 != nil || err2 != nil || err3 != nil {
				reply(fmt.Errorf("bad command %q", line))
				continue
			}
			c = maptear.Mod{Case: f[1], Addr: addr, Next: next, Prot: prot, Page: uint64(page)}
			reply(nil)
		case "gap":
			l := explore.LookupGapLayout(strings.Join(f[1:], ""))
			if l == nil || gap != nil {
				reply(fmt.Errorf("bad command %q", line))
				continue
			}
			p := l.Place(maptear.GapBase, uint64(page))
			gap = &p
			reply(p.Setup(sysGapMapper{}))
		case "ungap":
			if gap == nil {
				reply(fmt.Errorf("no gap layout"))
				continue
			}
			lo, hi := gap.Span()
			gap = nil
			_, _, e := unix.Syscall(unix.SYS_MUNMAP, uintptr(lo), uintptr(hi-lo), 0)
			reply(errnoErr(e))
		case "m":
			reply(c.Modify(sysMapper{}))
		case "r":
			reply(c.Restore(sysMapper{}))
		case "g":
			step := func() error {
				if err := c.Modify(sysMapper{}); err != nil {
					return err
				}
				return c.Restore(sysMapper{})
			}
			if gap != nil {
				step = func() error { return gap.Modify(sysGapMapper{}) }
			}
			reply(freeRun(step, in))
		case "s":
		case "q":
			return 0
		default:
			reply(fmt.Errorf("unknown command %q", line))
		}
	}
}

// freeRun runs step (a modification and its restore, or a gap layout's
// modification) until a command is waiting on stdin, looking every 64
// steps.
func freeRun(step func() error, in *bufio.Reader) error {
	fds := []unix.PollFd{{Fd: 0, Events: unix.POLLIN}}
	for i := 1; ; i++ {
		if err := step(); err != nil {
			return err
		}
		if i%64 == 0 {
			if in.Buffered() > 0 {
				return nil
			}
			if n, _ := unix.Poll(fds, 0); n > 0 {
				return nil
			}
		}
	}
}

// sysGapMapper makes a gap layout's changes with system calls.
type sysGapMapper struct{}

func (sysGapMapper) MapAnon(addr, length uint64, prot int) error {
	_, err := sysMmap(uintptr(addr), uintptr(length), prot, anonFixed)
	return err
}

// Write stores a byte at addr from the kernel side (getrandom(2) copies one
// to it), which write-faults the page in as a store would, with no pointer
// made from an address.
func (sysGapMapper) Write(addr uint64) error {
	_, _, e := unix.Syscall(unix.SYS_GETRANDOM, uintptr(addr), 1, 0)
	return errnoErr(e)
}

func (sysGapMapper) Move(src, dst uint64) error {
	p := uintptr(os.Getpagesize())
	return sysMremap(uintptr(src), p, p, unix.MREMAP_MAYMOVE|unix.MREMAP_FIXED, uintptr(dst))
}

func errnoErr(e unix.Errno) error {
	if e != 0 {
		return e
	}
	return nil
}
